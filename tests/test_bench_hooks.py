"""The BO search's observer hook (``tuner.search.bo.OBSERVERS``), which experiments use to
watch its rounds: off by default, told each round's pool, choice and scores and each
batch's measurements, and removed after its ``with`` block."""

from __future__ import annotations

import numpy as np
import pytest
from tvm.s_tir import meta_schedule as ms

import tuner.search.bo as bo
from tuner.search.params import BOConfig


class _Watcher:
    def __init__(self) -> None:
        self.rounds: list[tuple[int, int, list[int], np.ndarray]] = []
        self.results: list[tuple[int, int]] = []

    def on_round(self, search, pool, chosen, scores):
        self.rounds.append((search.rounds, len(pool), list(chosen), np.asarray(scores)))
        return [0]  # ignored: observers only watch

    def on_results(self, search, candidates, results):
        self.results.append((search.rounds, len(results)))


class _RoundsOnly:
    def __init__(self) -> None:
        self.calls = 0

    def on_round(self, search, pool, chosen, scores):
        self.calls += 1


def _tune(ctx, rounds_of: int = 8, trials: int = 16) -> list[list]:
    search = bo.BatchBOSearch({"population_size": 16, "init_min_unmeasured": 8},
                              BOConfig(pool_size=16, population=16, carry=8, mc_samples=16))
    ctx2 = ms.TuneContext(mod=ctx.mod, target=ctx.target, space_generator="post-order-apply",
                          search_strategy=search, rand_state=1, num_threads=1)
    ctx2.pre_tuning(max_trials=trials, num_trials_per_iter=rounds_of,
                    design_spaces=ctx2.generate_design_space(),
                    database=ms.database.MemoryDatabase(),
                    cost_model=ms.cost_model.RandomModel())
    batches = []
    while (batch := ctx2.generate_measure_candidates()) is not None:
        batches.append(list(batch))
        ctx2.notify_runner_results(batch, [ms.runner.RunnerResult([1e-3 * (1 + i)], None)
                                           for i in range(len(batch))])
    return batches


def test_observers_see_each_rounds_pool_choice_and_measurements(context_and_candidates):
    ctx, _ = context_and_candidates
    assert bo.OBSERVERS == []  # off by default
    watcher, partial = _Watcher(), _RoundsOnly()
    with bo.observing(watcher), bo.observing(partial):
        batches = _tune(ctx)
    assert bo.OBSERVERS == []
    assert [r[0] for r in watcher.rounds] == [1, 2] and partial.calls == 2
    for (_, size, chosen, scores), batch in zip(watcher.rounds, batches, strict=False):
        assert len(chosen) == len(batch) == 8 and size >= 8 and scores.shape == (size,)
        assert len(set(chosen)) == 8 and max(chosen) < size
    assert [len(b) for b in batches] == [8, 8]  # the returned [0] changed nothing
    assert watcher.results == [(1, 8), (2, 8)]


def test_an_observer_is_removed_when_the_block_raises():
    with pytest.raises(RuntimeError):
        with bo.observing(_RoundsOnly()):
            assert len(bo.OBSERVERS) == 1
            raise RuntimeError("stop")
    assert bo.OBSERVERS == []

