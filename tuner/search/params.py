"""The searches' names and the batch BO search's settings: plain data, read by the tune
configuration (:mod:`tuner.app.config`) and the searches alike, without importing either."""

from __future__ import annotations

from dataclasses import dataclass

from metatune.errors import ConfigError

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
    cold_population: int = 0
    cold_genetic_iters: int = 0

    def __post_init__(self) -> None:
        """Check the settings: a ``BOConfig`` that exists is valid.

        Raises:
            ConfigError: The first invalid setting, with what to do.
        """
        if self.acquisition not in ACQUISITIONS:
            raise ConfigError(f"search_params.bo.acquisition={self.acquisition!r}: choose "
                              f"{' or '.join(ACQUISITIONS)}")
        if self.engine not in ENGINES:
            raise ConfigError(f"search_params.bo.engine={self.engine!r}: choose "
                              f"{' or '.join(ENGINES)}")
        if min(self.pool_size, self.population, self.mc_samples) <= 0 or self.max_history < 4 \
                or min(self.genetic_iters, self.carry, self.cold_population,
                       self.cold_genetic_iters) < 0:
            raise ConfigError("search_params.bo: pool_size, population and mc_samples must be "
                              "positive, genetic_iters, carry and the cold_* settings not "
                              "negative, max_history >= 4")
