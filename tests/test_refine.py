"""Local refinement: one-decision moves, neighbours that replay, never a measured one, the
round's share kept, and the descent moving with the best."""

from __future__ import annotations

import math

import pytest
from tvm.s_tir.meta_schedule.runner import RunnerResult
from tvm_ffi import structural_hash

from metatune.errors import ConfigError
from tuner.app.config import SearchParams
from tuner.app.factories import make_search
from tuner.engine.norepeat import NoRepeatSearch, replay
from tuner.search.refine import RefineSearch, merge, with_refine
from tuner.search.refine_moves import (
    categorical_moves,
    decisions,
    location_moves,
    tile_moves,
)
from tuner.search.refine_neighbours import Refiner, RefineTally
from tuner.search.refine_params import RefineConfig


def _differ(a, b) -> list[int]:
    assert len(a) == len(b)
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


def test_tile_moves_keep_the_extent_and_change_one_tiling():
    base = (2, 7, 1, 4)
    out = tile_moves(base, max_innermost=4)
    assert out and len(out) == len(set(out)) and base not in out
    assert all(math.prod(t) == math.prod(base) and len(t) == 4 for t in out)
    assert all(t[-1] <= 4 for t in out)  # the innermost stays within its limit
    assert (1, 14, 1, 4) in out and (2, 7, 2, 2) in out  # a prime moved between two levels
    assert (4, 7, 1, 2) in out  # two levels swapped
    assert (1, 7, 1, 8) not in out  # 8 > max_innermost
    assert tile_moves((1, 1)) == []  # nothing to move


def test_categorical_and_location_moves():
    assert categorical_moves(2, [0.25, 0.25, 0.25, 0.25]) == [0, 1, 3]
    assert categorical_moves(0, [0.5, 0.0, 0.5]) == [2]  # a choice never sampled: never moved to
    assert location_moves(7) == [6, 8, 9]
    assert location_moves(-2) == [-1, 0]  # nothing below inline


def test_config_checks_itself_and_sizes_the_round():
    assert RefineConfig().enabled is False  # off until an A/B says otherwise
    assert RefineConfig(candidates=4, max_share=0.25).room(16) == 4
    assert RefineConfig(candidates=8, max_share=0.25).room(16) == 4  # the share binds
    assert RefineConfig(candidates=2, max_share=0.5).room(16) == 2
    assert RefineConfig(max_share=0.25).room(3) == 0
    with pytest.raises(ConfigError, match="max_share"):
        RefineConfig(max_share=1.5)
    with pytest.raises(ConfigError, match="from_best"):
        RefineConfig(from_best=0)


@pytest.mark.parametrize("share, batch, n_own, n_ref", [
    (0.25, 16, 16, 4), (0.25, 16, 16, 2), (0.5, 8, 8, 4), (0.25, 8, 3, 2), (0.3, 10, 10, 3),
])
def test_merge_keeps_the_share_in_every_prefix(share, batch, n_own, n_ref):
    own = [f"o{i}" for i in range(n_own)]
    ref = [f"r{i}" for i in range(n_ref)]
    out = merge(own, ref, share, batch)
    assert len(out) == min(batch, n_own + n_ref)
    assert [c for c in out if c[0] == "r"] == ref  # every neighbour, best first
    assert [c for c in out if c[0] == "o"] == own[: len(out) - n_ref]  # own in order, cut
    if n_own + n_ref >= batch:  # a full round: every cut keeps the share
        for n in range(1, len(out) + 1):
            assert sum(c[0] == "r" for c in out[:n]) <= math.floor(n * share + 1e-9)


@pytest.fixture(scope="module")
def task(context_and_candidates):
    """The small conv's context, its postprocessors and its random candidates."""
    ctx, cands = context_and_candidates
    return ctx, list(ctx.space_generator.postprocs), cands


def _observed(cands, params=None) -> Refiner:
    """A refiner that has seen ``cands`` measured at 1, 2, 3, ... ms."""
    refiner = Refiner(params or RefineConfig(enabled=True, pool=16), seed=0)
    for i, c in enumerate(cands):
        refiner.observe(structural_hash(c.sch.mod), c.sch, 1.0 / (1e-3 * (i + 1)))
    return refiner


def test_neighbours_differ_in_one_decision_replay_and_are_unmeasured(task):
    ctx, post, cands = task
    refiner = _observed(cands[:4], RefineConfig(enabled=True, pool=16, from_best=1))
    tally = RefineTally()
    found = refiner.propose(ctx.mod, post, 6, set(), None, tally)
    assert len(found) == 6 and tally.replay.tried == 16
    base = decisions(cands[0].sch.trace)  # the best measured (1 ms)
    measured = {structural_hash(c.sch.mod) for c in cands[:4]}
    for h, sch in found:
        assert len(_differ(base, decisions(sch.trace))) == 1
        assert h == structural_hash(sch.mod) and h not in measured
        # as NoRepeatSearch replays a stored record: the same schedule again
        assert structural_hash(replay(sch.trace, ctx.mod, post).mod) == h
    assert len({h for h, _ in found}) == len(found)


def test_a_neighbour_builds(task):
    import tvm

    ctx, post, cands = task
    found = _observed(cands[:1]).propose(ctx.mod, post, 1, set(), None, RefineTally())
    lib = tvm.compile(found[0][1].mod, target=ctx.target)
    assert lib is not None


def test_measured_and_excluded_neighbours_never_come_back(task):
    ctx, post, cands = task
    params = RefineConfig(enabled=True, pool=64, from_best=1)
    refiner = _observed(cands[:1], params)
    tally = RefineTally()
    first = refiner.propose(ctx.mod, post, 4, set(), None, tally)
    assert len(first) == 4
    for h, sch in first[:2]:  # measured, slower than the best
        refiner.observe(h, sch, 1.0)
    excluded = {first[2][0]}  # already in the round
    again = refiner.propose(ctx.mod, post, 100, excluded, None, tally)
    got = {h for h, _ in again}
    assert got and not got & ({h for h, _ in first[:2]} | excluded)
    assert first[3][0] in got  # unmeasured and not excluded: still a neighbour


def test_the_best_predicted_neighbours_are_chosen(task):
    ctx, post, cands = task
    refiner = _observed(cands[:1])
    scored: list = []

    def score(schedules):
        scored.extend(schedules)
        return [structural_hash(s.mod) % 1000 for s in schedules]

    found = refiner.propose(ctx.mod, post, 3, set(), score, RefineTally())
    by_score = sorted((structural_hash(s.mod) % 1000 for s in scored), reverse=True)
    assert [structural_hash(s.mod) % 1000 for _, s in found] == by_score[:3]


def test_a_local_optimum_moves_on_to_the_next_best(task):
    ctx, post, cands = task
    params = RefineConfig(enabled=True, pool=1000, from_best=1)
    refiner = _observed(cands[:2], params)
    tally = RefineTally()
    first = refiner.propose(ctx.mod, post, 1000, set(), None, tally)
    best, second = decisions(cands[0].sch.trace), decisions(cands[1].sch.trace)
    assert first and all(len(_differ(best, decisions(s.trace))) == 1 for _, s in first)
    for h, sch in first:  # every neighbour of the best measured, none better
        refiner.observe(h, sch, 1.0)
    then = refiner.propose(ctx.mod, post, 3, set(), None, tally)
    assert then and all(len(_differ(second, decisions(s.trace))) == 1 for _, s in then)


class _Inner:
    """A search proposing the next 8 of a fixed list each round, recording what it is told."""

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
        self.told.append([structural_hash(c.sch.mod) for c in candidates])

    def post_tuning(self) -> None:
        pass

    def clone(self):
        return _Inner(self.candidates)


def test_the_search_adds_neighbours_of_the_new_best_each_round(task):
    ctx, _, cands = task
    inner = _Inner(cands)
    tally = RefineTally()
    search = RefineSearch(inner, RefineConfig(enabled=True, candidates=4, max_share=0.25,
                                              from_best=1, pool=16), seed=0, tally=tally)
    search._initialize_with_tune_context(ctx)
    search.pre_tuning(64, 8, [], None, None)
    first = list(search.generate_measure_candidates())
    assert [structural_hash(c.sch.mod) for c in first] == [structural_hash(c.sch.mod)
                                                           for c in cands[:8]]
    assert tally.rounds == 0  # nothing measured yet: the search's own round
    search.notify_runner_results(first, [RunnerResult([1e-3 * (i + 1)], None)
                                         for i in range(8)])
    base = first[0]
    for r in range(2):  # each round around the best measured so far
        batch = list(search.generate_measure_candidates())
        own = {structural_hash(c.sch.mod) for c in cands}
        refined = [c for c in batch if structural_hash(c.sch.mod) not in own]
        assert len(batch) == 8 and len(refined) == 2  # 0.25 of 8
        assert [i for i, c in enumerate(batch) if c in refined] == [3, 7]
        for c in refined:
            assert len(_differ(decisions(base.sch.trace), decisions(c.sch.trace))) == 1
        # the first neighbour measures fastest: the next round descends from it
        secs = [5e-4 / (r + 1) if c is refined[0] else 2e-3 for c in batch]
        search.notify_runner_results(batch, [RunnerResult([s], None) for s in secs])
        assert inner.told[-1] == [structural_hash(c.sch.mod) for c in batch]  # all of it
        base = refined[0]
    assert (tally.rounds, tally.served, tally.candidates, tally.improved) == (2, 2, 4, 2)
    assert ("4 neighbours in 2 of 2 rounds, 2 faster than the best before them, 0 failed"
            in tally.summary())


def test_make_search_puts_refinement_inside_the_no_repeat_wrapper():
    plain = make_search("evolutionary", SearchParams())
    assert isinstance(plain, NoRepeatSearch) and not isinstance(plain.inner, RefineSearch)
    params = SearchParams(refine=RefineConfig(enabled=True))
    search = make_search("bo", params, seed=3)
    assert isinstance(search, NoRepeatSearch) and isinstance(search.inner, RefineSearch)
    assert search.inner.seed == 3 and type(search.inner.inner).__name__ == "BatchBOSearch"
    again = with_refine(search.inner.inner)
    assert isinstance(again, RefineSearch)
    assert search.clone() is not None  # each task's context clones it


def test_refinement_wraps_only_the_searches_it_names():
    params = SearchParams(refine=RefineConfig(enabled=True))  # searches: BO only
    evolutionary = make_search("evolutionary", params)  # preset xgb's stays TVM's own
    assert not isinstance(evolutionary.inner, RefineSearch)
    assert isinstance(make_search("bo", params).inner, RefineSearch)
    both = SearchParams(refine=RefineConfig(enabled=True, searches=["bo", "evolutionary"]))
    assert isinstance(make_search("evolutionary", both).inner, RefineSearch)
    with pytest.raises(ConfigError, match="refine.searches: unknown evolution"):
        make_search("bo", SearchParams(refine=RefineConfig(enabled=True,
                                                           searches=["evolution"])))


def test_transfer_wraps_around_refinement():
    from tuner.search.transfer import with_transfer
    from tuner.search.transfer_search import TransferSearch

    search = make_search("bo", SearchParams(refine=RefineConfig(enabled=True)))
    both = with_transfer(search, candidates=[], share=0.5)
    assert isinstance(both, NoRepeatSearch) and isinstance(both.inner, TransferSearch)
    assert isinstance(both.inner.inner, RefineSearch)


def test_the_attribution_has_a_refinement_lever_for_the_a_b():
    from bench.attribution.variants import BY_NAME, DEFAULT_VARIANTS, LEVER
    from tuner.app.config import load_tune_config

    variant = BY_NAME["default+refine"]
    assert variant.part == LEVER and variant.name not in DEFAULT_VARIANTS  # run when asked
    cfg = load_tune_config(overrides=variant.dotlist())
    assert cfg.search_params.refine.enabled and (cfg.cost_model, cfg.search) == ("metatune", "bo")
