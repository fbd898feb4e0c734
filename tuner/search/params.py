"""The searches' names and the batch BO search's settings: plain data, read by the tune
configuration (:mod:`tuner.app.config`) and the searches alike, without importing either."""

from __future__ import annotations

from dataclasses import dataclass

#: The searches ``search=`` may name (see :func:`tuner.app.tuning.make_search`).
SEARCHES = ("bo", "evolutionary", "replay")
#: The batch acquisitions of :func:`tuner.search.bo_select.select_batch`.
ACQUISITIONS = ("qlognei", "qucb")
#: The batch selection engines of :func:`tuner.search.bo_select.select_batch`.
ENGINES = ("joint", "botorch")


@dataclass
class BOConfig:
    """Settings of the batch BO search (:class:`tuner.search.bo.BatchBOSearch`).

    Attributes:
        pool_size: Candidates the evolutionary sampler proposes per round.
        population: The sampler's evolutionary population (smaller than a plain
            evolutionary search's: it proposes, BO chooses).
        genetic_iters: The sampler's evolution rounds per proposal.
        carry: Unchosen candidates kept for the next round.
        acquisition: ``qlognei`` or ``qucb``.
        engine: ``joint`` or ``botorch`` (see :func:`tuner.search.bo_select.select_batch`).
        mc_samples: Quasi-Monte-Carlo samples of the acquisition.
        beta: ``qucb`` exploration weight.
        max_history: Measurements the GP is fitted on (the best half and the latest).
        device: ``auto`` (CUDA/ROCm if torch sees one), ``cpu`` or ``cuda``.
        cold_population: The sampler's population while the task has no measurement yet
            (the cost model is then the only guide, so it may search more); 0: ``population``.
        cold_genetic_iters: The sampler's evolution rounds while the task has no measurement
            yet; 0: ``genetic_iters``.
    """

    pool_size: int = 96
    population: int = 96
    genetic_iters: int = 1
    carry: int = 128
    acquisition: str = "qlognei"
    engine: str = "joint"
    mc_samples: int = 128
    beta: float = 0.2
    max_history: int = 256
    device: str = "auto"
    cold_population: int = 0
    cold_genetic_iters: int = 0
