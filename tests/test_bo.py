"""Batch BO: knob vectors, batch selection, and the search strategy's bookkeeping."""

from __future__ import annotations

import os

import numpy as np
import pytest
from tvm.s_tir import meta_schedule as ms

from tuner.search.bo import BatchBOSearch
from tuner.search.bo_select import greedy_batch, posterior_mean, select_batch
from tuner.search.knobs import KnobSpace, knob_values, signature
from tuner.search.params import BOConfig


def test_knob_vectors(context_and_candidates):
    _, cands = context_and_candidates
    space = KnobSpace()
    x = space.matrix(cands)
    assert x.shape == (len(cands), space.dim)
    assert np.all((x >= 0) & (x <= 1.0 + 1e-9))
    assert np.allclose(space.matrix(cands), x)  # deterministic
    # each candidate has exactly one design-space slot
    assert np.all(x[:, space.width:].sum(1) == 1)
    # candidates of one design space have the same number of decisions
    by_space: dict = {}
    for c in cands:
        by_space.setdefault(signature(c.sch.trace), set()).add(len(knob_values(c.sch.trace)))
    assert all(len(lengths) == 1 for lengths in by_space.values())
    # random schedules differ in their knobs
    assert len({tuple(row) for row in x}) > len(cands) // 2


def _toy(n_hist: int, m: int, d: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    f = lambda x: np.exp(-4 * ((x[:, :3] - 0.3) ** 2).sum(1))  # noqa: E731
    hx, px = rng.uniform(size=(n_hist, d)), rng.uniform(size=(m, d))
    return f, hx, px


@pytest.mark.parametrize("engine", ["joint", "botorch"])
@pytest.mark.parametrize("acquisition", ["qlognei", "qucb"])
def test_select_batch_prefers_good_regions(engine, acquisition):
    f, hx, px = _toy(48, 128)
    idx = select_batch(px, np.zeros(len(px)), hx, np.zeros(len(hx)), f(hx), 16,
                       BOConfig(acquisition=acquisition, engine=engine))
    assert len(idx) == 16 and len(set(idx)) == 16 and all(0 <= i < len(px) for i in idx)
    assert f(px[idx]).mean() > 1.5 * f(px).mean()  # the GP found the bump without a prior


def test_select_batch_without_history_follows_the_prior():
    _, _, px = _toy(0, 20)
    prior = np.arange(20, dtype=float)
    idx = select_batch(px, prior, np.zeros((0, px.shape[1])), np.zeros(0), np.zeros(0), 5)
    assert idx == [19, 18, 17, 16, 15]


def test_model_acquisition_takes_the_cost_models_top_without_a_gp(monkeypatch):
    import tuner.search.bo_select as bo_select

    monkeypatch.setattr(bo_select, "fit_gp", lambda *a, **k: pytest.fail("no GP to fit"))
    f, hx, px = _toy(32, 20)
    prior = np.arange(20, dtype=float)
    assert select_batch(px, prior, hx, np.zeros(len(hx)), f(hx), 4,
                        BOConfig(acquisition="model")) == [19, 18, 17, 16]


def test_posterior_mean_learns_from_the_measurements_on_the_targets_scale():
    f, hx, px = _toy(48, 64)
    flat = np.zeros(len(px))
    mean = posterior_mean(px, flat, hx, np.zeros(len(hx)), 3.0 * f(hx))
    assert mean.shape == (len(px),)
    assert np.corrcoef(mean, f(px))[0, 1] > 0.8  # the GP found the bump without a prior
    assert abs(mean.mean() - 3.0 * f(px).mean()) < 0.5  # in the measurements' units
    # fewer than three distinct measurements: the cost model's prediction as it is
    prior = np.arange(len(px), dtype=float)
    assert np.array_equal(posterior_mean(px, prior, hx[:2], np.zeros(2), np.ones(2)), prior)


def test_the_kernel_compares_the_knobs_and_the_prediction_sets_the_mean():
    """The GP's kernel has one lengthscale per knob (the last column, the prediction, only
    sets the prior mean: the ``knobs+prior`` kernel was retired)."""
    import torch

    from tuner.search.bo_select import fit_gp

    x = torch.rand(10, 4, dtype=torch.float64)
    y = torch.rand(10, 1, dtype=torch.float64)
    assert fit_gp(x, y).covar_module.base_kernel.lengthscale.shape[-1] == 3


def test_a_failed_gp_fit_leaves_the_cost_models_prediction(monkeypatch):
    from botorch.exceptions.errors import ModelFittingError

    import tuner.search.bo_select as bo_select

    def fail(*args, **kwargs):
        raise ModelFittingError("All attempts to fit the model have failed.")

    monkeypatch.setattr(bo_select, "fit_gp", fail)
    f, hx, px = _toy(16, 8)
    prior = np.arange(len(px), dtype=float)
    assert np.array_equal(posterior_mean(px, prior, hx, np.zeros(len(hx)), f(hx)), prior)
    assert select_batch(px, prior, hx, np.zeros(len(hx)), f(hx), 3) == [7, 6, 5]


def test_greedy_batch_picks_best_expected_improvement_first():
    import torch

    torch.manual_seed(0)
    samples = torch.randn(256, 2 + 5)
    samples[:, 2 + 3] += 3.0  # pool member 3 is clearly best
    chosen = greedy_batch(samples, 2, 5, "qlognei")
    assert chosen[0] == 3 and sorted(chosen) == list(range(5))


def test_search_never_repeats_and_survives_failures(context_and_candidates):
    ctx, cands = context_and_candidates
    search = BatchBOSearch({"population_size": 16, "init_min_unmeasured": 8},
                           BOConfig(pool_size=16, population=16, carry=8, mc_samples=16))
    ctx2 = ms.TuneContext(mod=ctx.mod, target=ctx.target, space_generator="post-order-apply",
                          search_strategy=search, rand_state=1, num_threads=1)
    ctx2.pre_tuning(max_trials=24, num_trials_per_iter=8,
                    design_spaces=ctx2.generate_design_space(),
                    database=ms.database.MemoryDatabase(),
                    cost_model=ms.cost_model.RandomModel())
    from tvm_ffi import structural_hash

    seen = set()
    rounds = 0
    while (batch := ctx2.generate_measure_candidates()) is not None:
        hashes = [structural_hash(c.sch.mod) for c in batch]
        assert not seen & set(hashes) and len(set(hashes)) == len(hashes)
        seen |= set(hashes)
        results = [ms.runner.RunnerResult([1e-3 * (1 + i)], None) for i in range(len(batch))]
        results[0] = ms.runner.RunnerResult(None, "build failed")  # failures are kept as 0
        ctx2.notify_runner_results(batch, results)
        rounds += 1
    assert rounds == 3 and len(seen) == 24


def test_carried_over_candidates_keep_their_hashes(context_and_candidates, monkeypatch):
    import tvm_ffi

    ctx, _ = context_and_candidates
    search = BatchBOSearch({"population_size": 16, "init_min_unmeasured": 8},
                           BOConfig(pool_size=16, population=16, carry=8, mc_samples=16))
    ctx2 = ms.TuneContext(mod=ctx.mod, target=ctx.target, space_generator="post-order-apply",
                          search_strategy=search, rand_state=1, num_threads=1)
    ctx2.pre_tuning(max_trials=16, num_trials_per_iter=8,
                    design_spaces=ctx2.generate_design_space(),
                    database=ms.database.MemoryDatabase(), cost_model=ms.cost_model.RandomModel())
    hash_of = tvm_ffi.structural_hash
    for _ in range(2):
        batch = ctx2.generate_measure_candidates()
        ctx2.notify_runner_results(batch, [ms.runner.RunnerResult([1e-3 * (1 + i)], None)
                                           for i in range(len(batch))])
        assert search.leftover and len(search.leftover) == len(search.leftover_hashes)
        assert search.leftover_hashes == [hash_of(c.sch.mod) for c in search.leftover]
    sampler, drawn, hashed = search.inner, [], []

    class Counting:  # the sampler, counting what it draws
        def generate_measure_candidates(self):
            fresh = list(sampler.generate_measure_candidates())
            drawn.extend(fresh)
            return fresh

        def notify_runner_results(self, *args):
            sampler.notify_runner_results(*args)

    search._inst.inner = Counting()
    monkeypatch.setattr(tvm_ffi, "structural_hash", lambda m: hashed.append(m) or hash_of(m))
    carried = list(search.leftover)
    pool = search._pool()
    assert carried and drawn and len(hashed) == len(drawn)  # the carried: not hashed again
    assert search.pool_hashes == [hash_of(c.sch.mod) for c in pool]


def test_preloaded_records_serve_as_history_without_a_second_replay(
        context_and_candidates, monkeypatch):
    from tvm_ffi import structural_hash

    import tuner.engine.norepeat

    ctx, cands = context_and_candidates
    known = [(structural_hash(c.sch.mod), c.sch, [1e-3 * (i + 1)]) for i, c in enumerate(cands[:4])]
    search = BatchBOSearch({"population_size": 16, "init_min_unmeasured": 8},
                           BOConfig(pool_size=16, population=16, carry=8, mc_samples=16))
    ctx2 = ms.TuneContext(mod=ctx.mod, target=ctx.target, space_generator="post-order-apply",
                          search_strategy=search, rand_state=1, num_threads=1)
    search.preload_measured(known)

    def no_replay(*_):
        raise AssertionError("records replayed twice")

    monkeypatch.setattr(tuner.engine.norepeat, "measured_schedules", no_replay)
    ctx2.pre_tuning(max_trials=8, num_trials_per_iter=8,
                    design_spaces=ctx2.generate_design_space(),
                    database=ms.database.MemoryDatabase(), cost_model=ms.cost_model.RandomModel())
    assert search.seen == {h for h, _, _ in known}
    assert search.hist_y == sorted(search.hist_y, reverse=True) and len(search.hist_y) == 4


def test_cold_sampler_proposes_until_the_task_has_a_measurement(context_and_candidates):
    ctx, _ = context_and_candidates
    search = BatchBOSearch({"population_size": 16, "init_min_unmeasured": 8},
                           BOConfig(pool_size=16, population=16, carry=8, mc_samples=16,
                                    cold_population=24, cold_genetic_iters=2))
    ctx2 = ms.TuneContext(mod=ctx.mod, target=ctx.target, space_generator="post-order-apply",
                          search_strategy=search, rand_state=1, num_threads=1)
    ctx2.pre_tuning(max_trials=16, num_trials_per_iter=8,
                    design_spaces=ctx2.generate_design_space(),
                    database=ms.database.MemoryDatabase(), cost_model=ms.cost_model.RandomModel())
    assert search.cold is not None and search.current_sampler() is search.cold
    first = ctx2.generate_measure_candidates()
    ctx2.notify_runner_results(first, [ms.runner.RunnerResult([1e-3], None)] * len(first))
    assert search.current_sampler() is search.inner
    second = ctx2.generate_measure_candidates()
    assert len(first) == 8 and len(second) == 8
    ctx2.post_tuning()
    plain = BatchBOSearch({"population_size": 16}, BOConfig(pool_size=16, population=16))
    plain._initialize_with_tune_context(ctx2)
    assert plain.cold is None and plain.current_sampler() is plain.inner


def test_a_failing_cold_sampler_falls_back_to_the_regular_one(context_and_candidates, caplog):
    ctx, _ = context_and_candidates

    class Broken:
        def generate_measure_candidates(self):
            raise RuntimeError("parallel_for_dynamic error with The block no longer exists")

        def pre_tuning(self, *args):
            pass

        def post_tuning(self):
            pass

    search = BatchBOSearch({"population_size": 16, "init_min_unmeasured": 8},
                           BOConfig(pool_size=16, population=16, carry=8, mc_samples=16,
                                    cold_population=24))
    ctx2 = ms.TuneContext(mod=ctx.mod, target=ctx.target, space_generator="post-order-apply",
                          search_strategy=search, rand_state=1, num_threads=1)
    search.cold = Broken()
    ctx2.pre_tuning(max_trials=8, num_trials_per_iter=8,
                    design_spaces=ctx2.generate_design_space(),
                    database=ms.database.MemoryDatabase(), cost_model=ms.cost_model.RandomModel())
    batch = ctx2.generate_measure_candidates()
    assert batch is not None and len(batch) == 8 and search.cold_failed
    assert "sampler failed" in caplog.text and "block no longer exists" in caplog.text


def test_bo_settings_are_validated_where_they_are_made():
    """Once: an unknown acquisition or engine cannot reach the search or ``select_batch``,
    which take a ``BOConfig`` and do not check it again."""
    from metatune.errors import ConfigError

    with pytest.raises(ConfigError, match="acquisition"):
        BOConfig(acquisition="ei")
    with pytest.raises(ConfigError, match="engine"):
        BOConfig(engine="fast")
    with pytest.raises(ConfigError, match="max_history"):
        BOConfig(max_history=2)


@pytest.mark.parametrize("recorded, seeds", [
    # L-BFGS-B stopped in its line search (ABNORMAL): botorch's default retried from the
    # same start (this kernel has no priors to resample) and failed all five attempts
    ("gp_line_search_stop.npz", (2, 3, 4)),
    # a lengthscale shrank to zero and the covariance was not positive definite
    ("gp_lengthscale_collapse.npz", (0, 2, 6)),
])
def test_the_gp_fits_that_failed_in_tuning_runs_now_fit(recorded, seeds):
    """Measurements on which the GP fit failed in tuning runs (2026-12-05: alexnet's conv
    with the replaced plain pair, 48 measurements; resnet-18's 3x3 conv with meta-BO-T,
    32; the last column is the cost model's prediction), and the round fell back to the
    cost model's ranking, for these torch seeds (the fit's retries draw from the noise
    prior): each now fits."""
    import torch

    from tuner.search.bo_select import fit_gp

    data = np.load(os.path.join(os.path.dirname(__file__), recorded))
    x, y = torch.as_tensor(data["x"]), torch.as_tensor(data["y"])
    assert x.shape[1] == 73 and y.shape == (len(x), 1)
    for seed in seeds:
        torch.manual_seed(seed)
        gp = fit_gp(x, y)
        assert not gp.training and torch.isfinite(gp.likelihood.noise).all()


def test_a_gp_fit_with_non_finite_hyper_parameters_is_refused(monkeypatch):
    """A kept fit must be usable: non-finite hyper-parameters raise ModelFittingError, on
    which the selection falls back to the cost model's ranking."""
    import botorch.fit
    import torch
    from botorch.exceptions.errors import ModelFittingError

    from tuner.search.bo_select import fit_gp

    def poisoned(mll, **kwargs):
        with torch.no_grad():
            mll.model.mean_module.weight.fill_(float("nan"))
        return mll.eval()

    monkeypatch.setattr(botorch.fit, "fit_gpytorch_mll", poisoned)
    x = torch.rand(10, 4, dtype=torch.float64)
    with pytest.raises(ModelFittingError, match="non-finite"):
        fit_gp(x, torch.rand(10, 1, dtype=torch.float64))
