"""The transfer wrapper: transferred candidates first in a task's first round only."""

from __future__ import annotations

import pytest
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.runner import RunnerResult
from tvm_ffi import structural_hash

from tuner.app.config import SearchParams
from tuner.app.factories import make_search
from tuner.engine.norepeat import NoRepeatSearch
from tuner.search.params import BOConfig
from tuner.search.transfer import TransferTally, with_transfer
from tuner.search.transfer_replay import ReplayStats
from tuner.search.transfer_search import TransferSearch


def _hashes(candidates) -> list[int]:
    return [structural_hash(c.sch.mod) for c in candidates]


class _Inner:
    """A search that proposes the next 8 of a fixed list each round and records what it
    is told."""

    def __init__(self, candidates) -> None:
        self.candidates = list(candidates)
        self.rounds = 0
        self.told: list = []

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def pre_tuning(self, *args) -> None:
        self.rounds = 0

    def generate_measure_candidates(self):
        batch = self.candidates[8 * self.rounds: 8 * self.rounds + 8]
        self.rounds += 1
        return batch or None

    def notify_runner_results(self, candidates, results) -> None:
        self.told.append(_hashes(candidates))

    def post_tuning(self) -> None:
        pass

    def clone(self):
        return _Inner(self.candidates)


def _results(candidates) -> list:
    return [RunnerResult([1e-3], None) for _ in candidates]


def test_first_round_only(context_and_candidates):
    ctx, cands = context_and_candidates
    transferred, own = cands[:6], cands[6:]
    asked = []

    def provider(context, k):
        asked.append(k)
        return transferred[:k], ReplayStats(tried=k, applied=k)

    tally = TransferTally()
    inner = _Inner(own)
    search = TransferSearch(inner, provider, share=0.5, tally=tally)
    search._initialize_with_tune_context(ctx)
    search.pre_tuning(64, 8, [], None, None)
    first = list(search.generate_measure_candidates())
    assert _hashes(first) == _hashes(transferred[:4]) + _hashes(own[:4])  # half, first
    search.notify_runner_results(first, _results(first))
    assert inner.told == [_hashes(first)]  # the search hears of the transferred too
    second = list(search.generate_measure_candidates())
    assert _hashes(second) == _hashes(own[8:16])  # the search's own round
    assert asked == [4] and (tally.tasks, tally.served, tally.candidates) == (1, 1, 4)


def test_no_transfer_for_a_task_with_measurements(context_and_candidates):
    ctx, cands = context_and_candidates
    search = TransferSearch(_Inner(cands[6:]), lambda c, k: (cands[:k], ReplayStats()))
    search._initialize_with_tune_context(ctx)
    search.preload_measured([(0, None, [1e-3])])  # as NoRepeatSearch hands them over
    search.pre_tuning(64, 8, [], None, None)
    assert _hashes(search.generate_measure_candidates()) == _hashes(cands[6:14])


def test_a_failing_provider_leaves_the_round_to_the_search(context_and_candidates, caplog):
    ctx, cands = context_and_candidates

    def provider(context, k):
        raise RuntimeError("no data")

    search = TransferSearch(_Inner(cands), provider)
    search._initialize_with_tune_context(ctx)
    search.pre_tuning(64, 8, [], None, None)
    assert _hashes(search.generate_measure_candidates()) == _hashes(cands[:8])
    assert "schedule transfer failed (no data)" in caplog.text  # the line, not a list of it


@pytest.mark.parametrize("name", ["evolutionary", "bo"])
def test_with_real_searches(name, context_and_candidates):
    """Through ``make_search``'s NoRepeatSearch, as the session tunes a task."""
    base_ctx, cands = context_and_candidates
    params = SearchParams(population_size=16, init_min_unmeasured=4, genetic_num_iters=1,
                          bo=BOConfig(pool_size=16, population=16, mc_samples=16))
    search = with_transfer(make_search(name, params), candidates=cands[:3], share=0.5)
    assert isinstance(search, NoRepeatSearch)
    ctx = ms.TuneContext(mod=base_ctx.mod, target=base_ctx.target,
                         space_generator="post-order-apply", search_strategy=search,
                         rand_state=0, num_threads=1)
    ctx.pre_tuning(max_trials=16, num_trials_per_iter=8,
                   design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(),
                   cost_model=ms.cost_model.RandomModel())
    first = list(ctx.generate_measure_candidates())
    assert _hashes(first)[:3] == _hashes(cands[:3]) and len(first) <= 8
    ctx.notify_runner_results(first, _results(first))
    second = ctx.generate_measure_candidates()
    assert second is not None and len(second) > 0
    assert not set(_hashes(second)) & set(_hashes(cands[:3]))
    assert len(set(_hashes(first))) == len(first)
    tvm.ir.assert_structural_equal(ctx.mod, base_ctx.mod)
