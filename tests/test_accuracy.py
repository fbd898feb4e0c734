"""The accuracy evaluation harness (``bench/accuracy``): splits, targets, aggregation,
xgb-Xfer's transfer."""

from __future__ import annotations

import os

import numpy as np
import pytest

from bench.accuracy.scoring import evaluate, summarize
from bench.accuracy.workloads import EvalWorkload, relative_targets, split_indices
from metatune.config import DEFAULT_DATA_DIR
from metatune.dataset import workload_order
from metatune.errors import ConfigError
from tuner.models.xgb_transfer import _discount


def test_query_set_is_fixed_across_k_and_disjoint_from_support():
    queries = set()
    for k in (0, 8, 16, 32, 64):
        support, query = split_indices(96, k, 32, seed=3)
        assert len(support) == k and len(query) == 32
        assert not set(support) & set(query)
        queries.add(tuple(query))
    assert len(queries) == 1
    assert tuple(split_indices(96, 8, 32, seed=4)[1]) not in queries


def test_targets_are_relative_to_the_best_support_sample():
    secs = np.array([4.0, 2.0, 1.0, 8.0])
    assert np.allclose(relative_targets(secs, np.array([0, 1])), [0.5, 1.0, 2.0, 0.25])
    assert np.allclose(relative_targets(secs, np.array([], dtype=int)), [0.25, 0.5, 1.0, 0.125])


class _Oracle:
    def scores(self, w, support, query, seed):
        return 1.0 / w.seconds[query]


class _Reversed:
    def scores(self, w, support, query, seed):
        return w.seconds[query]


def test_evaluate_and_summarize():
    rng = np.random.default_rng(0)
    workloads = [EvalWorkload(f"w{i}", None, [], rng.uniform(1, 2, 40)) for i in range(3)]
    rows = evaluate(workloads, {"oracle": _Oracle(), "reversed": _Reversed()}, (0, 4), [0, 1],
                    query=16)
    assert len(rows) == 2 * 3 * 2 * 2
    s = summarize(rows)
    assert s["oracle"]["4"]["pairwise"]["median"] == 1.0
    assert s["reversed"]["0"]["pairwise"]["median"] == 0.0
    assert s["oracle"]["0"]["top5_recall"]["median"] == 1.0


class _FixedScores:
    """Stands in for XGBMethod: fixed scores per candidate."""

    def __init__(self, scores):
        self.scores_ = scores

    def scores(self, w, support, query, seed):
        return self.scores_[query]


def test_an_ensemble_is_the_mean_of_its_members_and_needs_two():
    from bench.accuracy.methods import EnsembleMethod

    rng = np.random.default_rng(0)
    a, b = rng.uniform(size=64), rng.uniform(size=64)
    w = EvalWorkload("w", None, [], 1.0 / (1.0 + rng.uniform(size=64)))
    query = np.arange(32)
    both = EnsembleMethod([_FixedScores(a), _FixedScores(b)]).scores(w, np.arange(0), query, 0)
    assert np.allclose(both, 0.5 * (a[query] + b[query]))
    with pytest.raises(ValueError, match="two"):
        EnsembleMethod([_FixedScores(a)])


def test_autotvm_discount():
    assert _discount(0) == 1.0 and _discount(64) == pytest.approx(0.5)
    assert _discount(300) < 0.05  # the base model is dropped after ~277 samples


def test_xfer_base_model_and_refit(tiny_data, tmp_path):
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    from bench.accuracy.workloads import load_eval_workloads
    from tuner.engine.targets import resolve_target
    from tuner.models.xgb_transfer import XferError, XferXGBModel, base_booster, train_base_booster

    target = resolve_target("llvm").target
    split = str(tiny_data / "ds" / "train")
    base = base_booster(split, target, 1, str(tmp_path))
    with pytest.raises(ConfigError, match="googlenet uses no workload"):  # no such fold here
        base_booster(split, target, 1, str(tmp_path), leave_out_networks=["googlenet"])
    names = [w["name"] for w in workload_order(split)]
    with pytest.raises(XferError, match="no valid records"):  # every workload left out
        train_base_booster(split, target, 1, leave_out=names)
    again = base_booster(split, target, 1, str(tmp_path))  # from the cache
    (w,) = load_eval_workloads(split, ("plain",), min_samples=6, limit=1)
    (v,) = load_eval_workloads(split, ("plain",), min_samples=6, names=[w.name])
    assert v.name == w.name and load_eval_workloads(split, ("plain",), 6, names=[]) == []
    ctx = ms.TuneContext(mod=w.mod, target=target)
    model = XferXGBModel(base=base, num_warmup_samples=0, adaptive_training=False,
                         verbose_eval=0, num_tuning_cores=1)
    before = model.predict(ctx, w.candidates)
    assert before.shape == (len(w.candidates),) and np.isfinite(before).all()
    cached = XferXGBModel(base=again, num_warmup_samples=0, num_tuning_cores=1)
    assert np.allclose(cached.predict(ctx, w.candidates), before)
    # several splits train one base model, cached apart from the one split's
    two = base_booster([split, split], target, 1, str(tmp_path))
    assert len(list(tmp_path.glob("xgb-xfer-*.json"))) == 2
    assert two.num_boosted_rounds() > 0
    model.update(ctx, w.candidates[:4], [RunnerResult([float(s)], None) for s in w.seconds[:4]])
    after = model.predict(ctx, w.candidates)
    assert not np.allclose(after, before)


def test_a_workload_in_two_splits_is_scored_once_per_split_under_its_own_name(tiny_data,
                                                                              tmp_path):
    from bench.accuracy.workloads import load_split_workloads

    split = tiny_data / "ds" / "train"
    (tmp_path / "mine").symlink_to(split)  # the same workloads, as if measured twice
    (tmp_path / "other").symlink_to(split)
    names = [w["name"] for w in workload_order(str(split))]
    got = load_split_workloads(str(tmp_path), ["mine", "other"], ("plain",), 6, names)
    assert [w.name for w in got] == [f"{n} [{sp}]" for sp in ("mine", "other") for n in names]
    once = load_split_workloads(str(tmp_path), ["mine"], ("plain",), 6, names[:1], limit=1)
    assert [w.name for w in once] == names[:1]  # one split: the names as they are


def test_the_gp_method_scores_with_the_adapted_model_as_prior(tiny_data):
    """``NAME+gp``: the model alone at k = 0, the BO search's GP after measurements."""
    from bench.accuracy.methods import GPMethod, MetaTuneMethod
    from bench.accuracy.workloads import load_eval_workloads
    from tuner.models.trained import load_model

    split = str(tiny_data / "ds" / "train")
    (w,) = load_eval_workloads(split, ("super",), min_samples=6, limit=1)
    base = MetaTuneMethod(load_model(None, graph="super", from_scratch=True))
    gp = GPMethod(base)
    none, query = np.array([], dtype=int), np.array([0, 1])
    assert np.array_equal(gp.scores(w, none, query, 0), base.scores(w, none, query, 0))
    support = np.array([2, 3, 4, 5])
    prior = base.scores(w, support, query, 0)
    scores = gp.scores(w, support, query, 0)
    assert scores.shape == (2,) and np.isfinite(scores).all()
    if len(np.unique(relative_targets(w.seconds, support)[support])) >= 3:
        assert not np.allclose(scores, prior)  # the GP moved the prior
    embed = GPMethod(base, features="embed").scores(w, support, query, 0)
    assert embed.shape == (2,) and np.isfinite(embed).all()
    with pytest.raises(ValueError, match="knobs or embed"):
        GPMethod(base, features="trace")


def test_xfer_refuses_data_of_another_target():
    import tvm

    from tuner.app.factories import make_cost_model
    from tuner.models.params import XferConfig

    cuda = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    with pytest.raises(ConfigError, match="collect data for cuda"):
        make_cost_model("xgb-xfer", num_cores=1,
                        xfer=XferConfig(data=os.path.join(DEFAULT_DATA_DIR, "train")), target=cuda)
