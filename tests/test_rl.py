"""RL search (Chameleon): the decision space, the policy's learning, the sampler, the search."""

from __future__ import annotations

import numpy as np
import pytest
from tvm.s_tir import meta_schedule as ms

from metatune.errors import ConfigError
from tuner.search.params import RLConfig
from tuner.search.rl import RLSearch
from tuner.search.rl_explore import Explorer
from tuner.search.rl_sampling import kmeans_knee, knee, representatives
from tuner.search.rl_space import DecisionSpace, tilings


@pytest.fixture(scope="module")
def space(context_and_candidates):
    ctx, _ = context_and_candidates
    return DecisionSpace(ctx.mod, ctx.generate_design_space(),
                         list(ctx.space_generator.postprocs))


def test_tilings_are_perfect_and_ordered():
    assert tilings(12, 2, 4) == [(3, 4), (4, 3), (6, 2), (12, 1)]
    assert len(tilings(64, 4)) == 84 and all(np.prod(t) == 64 for t in tilings(64, 4))


def test_points_build_and_read_back(space, context_and_candidates):
    _, cands = context_and_candidates
    points = [space.point_of(c.sch.trace) for c in cands]
    assert all(p is not None for p in points)  # every sampled candidate is a point
    rng = np.random.default_rng(0)
    for point in space.random_points(6, rng):
        made = space.build(point)
        assert made is not None
        cand, applied = made
        assert space.point_of(cand.sch.trace) == applied
    x, mask = space.state(points), space.moves(points)
    assert x.shape == (len(points), space.dim) and np.all((x >= 0) & (x <= 1))
    assert mask.shape == (len(points), space.width, 3) and mask[:, :, 1].all()
    assert not mask[:, :, 0][np.array([p[1][0] for p in points]) == 0, 0].any()


def test_database_records_read_back_as_points(space, context_and_candidates, tmp_path):
    """A resumed run finds its start points in the JSON database (traces round-tripped)."""
    from tuner.engine.norepeat import measured_schedules

    ctx, cands = context_and_candidates
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    workload = db.commit_workload(ctx.mod)
    for i, c in enumerate(cands[:4]):
        db.commit_tuning_record(ms.database.TuningRecord(
            c.sch.trace, workload, [1e-3 * (i + 1)], ctx.target, c.args_info))
    again = ms.database.JSONDatabase(work_dir=str(tmp_path))
    known = measured_schedules(again, ctx.mod, list(ctx.space_generator.postprocs))
    assert [space.point_of(sch.trace) for _, sch, _ in known] == [
        space.point_of(c.sch.trace) for c in cands[:4]]


def test_policy_improves_the_predicted_score_over_a_rollout(space):
    """With a fixed toy scorer (closer to 0.8 in every decision is better), rollouts of
    the untrained policy drift away from it; after a few rounds of PPO they climb."""
    cache: dict = {}

    def resolve(point):
        if point not in cache:
            made = space.build(point)
            cache[point] = None if made is None else made[1]
        return cache[point]

    def score(points):
        return -((space.state(points)[:, : space.width] - 0.8) ** 2).sum(1)

    explorer = Explorer(space, RLConfig(rollouts=8, max_steps=6), seed=0)
    rng = np.random.default_rng(0)
    gains = []
    for _ in range(10):
        starts = [p for p in (resolve(q) for q in space.random_points(8, rng)) if p]
        found = explorer.explore(starts, resolve, score)
        assert set(found.scores) >= set(starts) and found.steps > 0
        gains.append(np.mean(found.end_scores) - np.mean(found.start_scores))
    assert gains[0] < 0 < np.mean(gains[-3:])


def test_knee_picks_the_number_of_blobs():
    rng = np.random.default_rng(0)
    centers = rng.uniform(-10, 10, size=(4, 5))
    x = np.concatenate([c + 0.3 * rng.standard_normal((30, 5)) for c in centers])
    labels, k = kmeans_knee(x, 2, 10, seed=0)
    assert k == 4 and len(set(labels.tolist())) == 4
    assert knee([1, 2, 3], [5.0, 5.0, 5.0]) == 1  # flat: the fewest clusters


def test_representatives_are_the_best_of_each_cluster():
    rng = np.random.default_rng(1)
    centers = np.array([[0.0, 0.0], [5.0, 5.0], [0.0, 5.0]])
    x = np.concatenate([c + 0.1 * rng.standard_normal((10, 2)) for c in centers])
    scores = rng.uniform(size=len(x))
    chosen = representatives(x, scores, q=8, min_clusters=2)
    best = [int(np.argmax(scores[i * 10:(i + 1) * 10])) + i * 10 for i in range(3)]
    assert sorted(chosen) == sorted(best) and list(chosen) == sorted(chosen,
                                                                      key=lambda i: -scores[i])
    assert representatives(x[:2], scores[:2], q=8, min_clusters=4) == sorted(
        [0, 1], key=lambda i: -scores[i])


def _context(ctx, search):
    return ms.TuneContext(mod=ctx.mod, target=ctx.target, space_generator="post-order-apply",
                          search_strategy=search, rand_state=1, num_threads=1)


def test_search_proposes_distinct_unmeasured_candidates(context_and_candidates):
    """At most the batch size, distinct, never measured (in the database or this run);
    a candidate that failed is never proposed again; the rounds use the policy."""
    from tvm_ffi import structural_hash

    ctx, cands = context_and_candidates
    known = [(structural_hash(c.sch.mod), c.sch, [1e-3 * (i + 1)] if i else None)
             for i, c in enumerate(cands[:6])]
    search = RLSearch(RLConfig(rollouts=6, max_steps=4, keep=24))
    ctx2 = _context(ctx, search)
    search.preload_measured(known)
    ctx2.pre_tuning(max_trials=24, num_trials_per_iter=8,
                    design_spaces=ctx2.generate_design_space(),
                    database=ms.database.MemoryDatabase(), cost_model=ms.cost_model.RandomModel())
    assert len(search.measured) == 5 and len(search.invalid) == 1  # resumed from the records
    seen = {h for h, _, _ in known}
    failed = set()
    while (batch := ctx2.generate_measure_candidates()) is not None:
        hashes = [structural_hash(c.sch.mod) for c in batch]
        assert 1 <= len(batch) <= 8 and len(set(hashes)) == len(hashes)
        assert not seen & set(hashes), "a measured candidate was proposed"
        seen |= set(hashes)
        results = [ms.runner.RunnerResult([1e-3 * (1 + i)], None) for i in range(len(batch))]
        results[0] = ms.runner.RunnerResult(None, "build failed")
        failed.add(search.proposed[hashes[0]])
        ctx2.notify_runner_results(batch, results)
        assert search.last_round["steps"] > 0
    assert search.trials == 24 and failed <= search.invalid


def test_rl_settings_are_validated_where_they_are_made():
    with pytest.raises(ConfigError, match="rollouts"):
        RLConfig(rollouts=0)
    with pytest.raises(ConfigError, match="best_starts"):
        RLConfig(best_starts=1.5)
    with pytest.raises(ConfigError, match="stay_prior"):
        RLConfig(stay_prior=1.0)


@pytest.mark.parametrize("prior", [1.0 / 3.0, 0.8])
def test_the_untrained_policy_stays_with_the_prior(prior):
    import torch

    from tuner.search.rl_policy import ActorCritic

    torch.manual_seed(0)
    policy = ActorCritic(dim=5, width=4, hidden=8, stay_prior=prior)
    mask = torch.ones(3, 4, 3, dtype=torch.bool)
    mask[:, 0, 0] = False  # decision 0 cannot move down: stay against up alone
    log_probs, _ = policy(torch.randn(3, 5), mask)
    stay = log_probs.exp()[..., 1]
    assert torch.allclose(stay[:, 1:], torch.full_like(stay[:, 1:], prior), atol=0.02)
    assert torch.all(stay[:, 0] > prior)


def test_starts_take_the_best_and_draw_the_rest_from_the_pool():
    search = RLSearch(RLConfig(rollouts=4, best_starts=0.75, best_pool=10))
    search.measured = {(i,): float(i) for i in range(20)}  # (19,) is the best
    search._resolve = lambda p: p  # every point builds as itself

    class NoRandom:
        def random_points(self, n, rng):
            return []

    search.space = NoRandom()
    starts = search._starts(np.random.default_rng(0), random_only=False)
    assert len(starts) == 3 and starts[0] == (19,)
    assert all(10 <= p[0] <= 18 for p in starts[1:])


def test_rl_presets_and_settings_in_the_tune_config():
    from tuner.app.config import PRESETS, load_tune_config, preset_of
    from tuner.app.factories import make_search

    assert len(PRESETS) == 7
    for given, canonical, model, graph in (("rl", "RL", "xgb", None),
                                           ("META-RL", "meta-RL", "metatune", "plain"),
                                           ("meta-rl-t", "meta-RL-T", "metatune", "super")):
        cfg = load_tune_config(overrides=[f"preset={given}"])
        assert (cfg.preset, cfg.cost_model, cfg.search) == (canonical, model, "rl")
        assert graph is None or cfg.metatune.graph == graph
        assert preset_of(cfg) == canonical
    cfg = load_tune_config(overrides=["search=RL", "search_params.rl.rollouts=4"])
    assert isinstance(cfg.search_params.rl, RLConfig) and cfg.search_params.rl.rollouts == 4
    assert "rl" not in cfg.search_params.evolutionary()
    search = make_search(cfg.search, cfg.search_params, seed=3)
    assert isinstance(search.inner, RLSearch) and search.inner.params.rollouts == 4
    with pytest.raises(ConfigError, match="search_params.rl.stop_stay"):
        load_tune_config(overrides=["search=rl", "search_params.rl.stop_stay=2"])
