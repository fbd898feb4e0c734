"""model_accuracy.py's choice of workloads and target: validation sets and the data's CPU."""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))

import model_accuracy  # noqa: E402


def _sidecar(path, data_dir: str, names: list[str], splits: list[str] | None = None) -> str:
    data = {"dir": data_dir, "val_workloads": names, **({"splits": splits} if splits else {})}
    with open(path.with_suffix(".json"), "w", encoding="utf-8") as f:
        json.dump({"data": data}, f)
    return str(path)


def test_validation_workloads_must_agree_and_come_from_the_data(tmp_path):
    data = os.path.join(model_accuracy.REPO, "data", "x")
    a = _sidecar(tmp_path / "a.ckpt", "data/x", ["w1", "w2"])
    b = _sidecar(tmp_path / "b.ckpt", "data/x", ["w2", "w1"])
    assert model_accuracy.validation_workloads([a, b], data) == (["w1", "w2"], ["train"])
    other = _sidecar(tmp_path / "c.ckpt", "data/x", ["w3"])
    with pytest.raises(SystemExit, match="other validation workloads"):
        model_accuracy.validation_workloads([a, other], data)
    both = _sidecar(tmp_path / "e.ckpt", "data/x", ["w1", "w1_nhwc"], ["train", "train-nhwc"])
    assert model_accuracy.validation_workloads([both], data)[1] == ["train", "train-nhwc"]
    with pytest.raises(SystemExit, match="splits"):
        model_accuracy.validation_workloads([a, _sidecar(tmp_path / "f.ckpt", "data/x",
                                                         ["w1", "w2"], ["train-nhwc"])], data)
    elsewhere = _sidecar(tmp_path / "d.ckpt", "data/y", ["w1", "w2"])
    with pytest.raises(SystemExit, match="trained on data/y"):
        model_accuracy.validation_workloads([elsewhere], data)
    with pytest.raises(SystemExit, match="cannot read"):
        model_accuracy.validation_workloads([str(tmp_path / "none.ckpt")], data)
    with pytest.raises(SystemExit, match="^--compiled-correction: cannot read"):
        model_accuracy.validation_workloads([str(tmp_path / "none.ckpt")], data,
                                            "--compiled-correction")


def test_the_target_is_the_datas_own(tmp_path):
    assert model_accuracy.data_target(str(tmp_path)) == "llvm"
    target = {"kind": "llvm", "mcpu": "haswell", "num-cores": 2, "keys": ["cpu"]}
    (tmp_path / "meta.json").write_text(json.dumps({"target": json.dumps(target)}))
    assert json.loads(model_accuracy.data_target(str(tmp_path))) == {
        "kind": "llvm", "mcpu": "haswell", "num-cores": 2}


def test_val_split_refuses_xgb():
    with pytest.raises(SystemExit, match="--no-xgb"):
        model_accuracy.main(["--split", "val"])


def test_a_networks_fold_needs_its_networks():
    with pytest.raises(SystemExit, match="--networks"):
        model_accuracy.main(["--split", "train-networks", "--no-xgb"])


def test_a_checkpoint_is_not_scored_on_workloads_it_trained_on(tmp_path):
    ckpt = tmp_path / "a.ckpt"
    ckpt.with_suffix(".json").write_text(json.dumps({"data": {"train_workloads": ["n/w1"]}}))
    model_accuracy._refuse_trained_on([str(ckpt)], ["n/w2"])
    model_accuracy._refuse_trained_on([str(tmp_path / "no-sidecar.ckpt")], ["n/w1"])
    with pytest.raises(SystemExit, match="trained on 1 of the scored.*leave_out_networks"):
        model_accuracy._refuse_trained_on([str(ckpt)], ["n/w1", "n/w2"])
    # --seen-ok: counted, for the page, instead of refused
    assert model_accuracy._refuse_trained_on([str(ckpt)], ["n/w1", "n/w2"], allow=True) == {
        str(ckpt): 1}


def test_ranking_ceiling_scores_one_platforms_order_against_anothers():
    import ranking_ceiling

    ref = {"w": {"t1": 1.0, "t2": 2.0, "t3": 3.0}, "few": {"t1": 1.0}}
    same = {"w": {"t1": 2.0, "t2": 4.0, "t3": 6.0, "t9": 1.0}}  # the same order, twice slower
    row = ranking_ceiling.agreement(ref, same, min_shared=3)
    assert row["workloads"] == 1 and row["shared_samples"] == 3  # "few" and t9 not shared
    assert row["pairwise"] == 1.0 and row["top5_recall"] == 1.0
    reverse = {"w": {"t1": 3.0, "t2": 2.0, "t3": 1.0}}
    assert ranking_ceiling.agreement(ref, reverse, min_shared=3)["pairwise"] == 0.0
    assert ranking_ceiling.agreement(ref, same, min_shared=4)["pairwise"] is None


def test_ranking_ceiling_scores_query_sized_subsets_as_the_models_are_scored():
    import ranking_ceiling

    times = {f"t{i}": 1.0 + i for i in range(40)}
    noisy = {t: s * (1.3 if i % 2 else 1.0) for i, (t, s) in enumerate(times.items())}
    whole = ranking_ceiling.agreement({"w": times}, {"w": noisy}, min_shared=16)
    subsets = ranking_ceiling.agreement({"w": times}, {"w": noisy}, 16, query=32,
                                        seeds=(0, 1))
    assert whole["shared_samples"] == subsets["shared_samples"] == 40
    import numpy as np

    from metatune.metrics import pairwise_accuracy
    from tuner.app.accuracy import split_indices

    truth = np.array([1.0 / s for s in times.values()])
    guess = np.array([1.0 / s for s in noisy.values()])
    picks = [split_indices(40, 0, 32, seed)[1] for seed in (0, 1)]  # the models' query sets
    want = np.mean([pairwise_accuracy(guess[i], truth[i]) for i in picks])
    assert subsets["pairwise"] == pytest.approx(want)
    assert whole["pairwise"] == pytest.approx(pairwise_accuracy(guess, truth))
    assert 0.5 < subsets["pairwise"] < 1.0


def test_adaptation_fit_top_support_is_the_models_best_and_the_query_its_next(tiny_data):
    import adaptation_fit
    import numpy as np

    from tuner.app.accuracy import load_eval_workloads
    from tuner.models.cost_model import load_model

    (w,) = load_eval_workloads(str(tiny_data / "ds" / "train"), ("super",), 6, limit=1)
    model = load_model(None, graph="super", from_scratch=True)
    rows = adaptation_fit.fit_rows(model, (0, 0.01, "head"), [w], [2], [0, 1], 3, "top")
    assert len(rows) == 1  # deterministic: one draw whatever the seeds
    assert rows[0]["query_before"] == rows[0]["query_after"]  # no step: nothing moves
    support, query = adaptation_fit.top_split(np.array([0.1, 0.9, 0.5, 0.7, 0.5, 0.2]), 2, 3)
    assert support.tolist() == [1, 3] and query.tolist() == [2, 4, 5]


def test_residuals_split_noise_from_what_neighbours_teach():
    import numpy as np
    import residuals

    rng = np.random.default_rng(0)
    n = 200
    knobs = rng.normal(size=(n, 3))
    smooth = np.sin(2 * knobs[:, 0])  # what the model misses: smooth in the knob space
    truth = knobs[:, 1] + smooth
    secs1, secs2 = (np.exp(-(truth + 0.05 * rng.normal(size=n))) for _ in range(2))
    row = residuals.decompose(knobs[:, 1], secs1, secs2, {"knobs": knobs}, m=3)
    assert row["pairwise_noise"] > 0.9 > row["pairwise_model"]
    assert row["tied_pairs"] == 0.0
    assert row["residual_systematic"] > 0.8  # the residual repeats: it is not noise
    assert row["nn_knobs"] > 0.5 and row["nn_ridge_knobs"] < row["nn_knobs"]  # not linear
    assert row["nn_trees_knobs"] > 0.5  # boosted trees find it too
    assert row["pairwise_nn_knobs"] > row["pairwise_base_knobs"] + 0.03
    # a residual that is pure noise repeats in neither measurement nor in any neighbour
    gauss = rng.normal(size=n)  # normal, so its normal scores are linear in it
    flat = residuals.decompose(gauss, np.exp(-(gauss + rng.normal(size=n))),
                               np.exp(-(gauss + rng.normal(size=n))), {"knobs": knobs}, m=3)
    assert abs(flat["residual_systematic"]) < 0.2 and abs(flat["nn_knobs"]) < 0.2
    assert flat["spearman_model_truth"] > 0.9  # the model is the truth: the noise corrected
    # a model that scores every schedule alike leaves nothing to decompose
    assert residuals.decompose(np.ones(n), secs1, secs2, {"knobs": knobs}, m=3) is None


def test_global_correction_learns_only_what_other_workloads_share(monkeypatch):
    import numpy as np
    import residuals

    monkeypatch.setitem(residuals.GLOBAL_PARAMS, "nthread", 1)  # spins on a busy machine
    rng = np.random.default_rng(0)

    def workload(shared: bool, n: int = 60) -> dict:
        x = rng.normal(size=(n, 2))  # column 0 decides the model's miss when shared
        model = rng.normal(size=n)
        miss = np.tanh(2 * x[:, 0]) if shared else rng.normal(size=n)
        truth = model + miss
        secs = tuple(np.exp(-(truth + 0.05 * rng.normal(size=n))) for _ in range(2))
        return {"prior": model, "secs": secs, "features": {"compiled": x}}

    learned = residuals.global_corrections([workload(True) for _ in range(5)], "compiled")
    assert len(learned) == 5
    for row in learned:
        assert row["nn_global_compiled"] > 0.6
        assert row["pairwise_nn_global_compiled"] > row["pairwise_base_global_compiled"] + 0.03
    # a miss of each workload's own that the others cannot teach
    own = residuals.global_corrections([workload(False) for _ in range(5)], "compiled")
    assert np.mean([r["nn_global_compiled"] for r in own]) < 0.2
    # a miss only a network's own convs share: left out together, nothing is learnt
    nets = []
    for net in range(4):
        x = rng.normal(size=(60, 4))
        miss = np.tanh(2 * x[:, net])  # a feature that decides only this network's miss
        for _ in range(2):  # two convs of the network, the same schedules
            w = workload(False)
            w["features"]["compiled"], w["group"] = x, f"net{net}"
            w["secs"] = tuple(np.exp(-(w["prior"] + miss + 0.05 * rng.normal(size=60)))
                              for _ in range(2))
            nets.append(w)
    apart = residuals.global_corrections(nets, "compiled")
    for w in nets:
        del w["group"]
    together = residuals.global_corrections(nets, "compiled")
    assert np.mean([r["nn_global_compiled"] for r in together]) > 0.5
    assert np.mean([r["nn_global_compiled"] for r in apart]) < 0.3
    alone = residuals.global_corrections([{**w, "group": "one"} for w in nets[:3]], "compiled")
    assert all(np.isnan(r["nn_global_compiled"]) for r in alone)  # nothing outside the group


def test_compiled_correction_fitted_elsewhere_moves_the_ranking_it_explains(monkeypatch):
    import types

    import compiled_correction
    import numpy as np
    import residuals

    from metatune.metrics import pairwise_accuracy

    monkeypatch.setitem(residuals.GLOBAL_PARAMS, "nthread", 1)
    rng = np.random.default_rng(1)

    def workload(n: int = 80) -> dict:
        raw = rng.integers(0, 50, size=(n, 3)).astype(float)  # counts; column 0 decides
        model = rng.normal(size=n)
        truth = model + 1.5 * np.tanh(np.log1p(raw[:, 0]) - 2.5)
        return {"prior": model, "secs": np.exp(-(truth + 0.05 * rng.normal(size=n))),
                "features": compiled_correction.workload_features(raw)}

    fit = compiled_correction.fit_correction([workload() for _ in range(10)])
    assert fit.weight > 0.3 and fit.stats["guess_residual_corr"] > 0.6
    # one task's twins weigh or train together: three tasks are too few to weigh on
    with pytest.raises(ValueError, match="at least"):
        compiled_correction.fit_correction([{**workload(), "group": i % 3} for i in range(9)])
    flat = {**workload(), "prior": np.zeros(80)}  # ranks nothing: left out
    assert compiled_correction.fit_correction(
        [workload() for _ in range(5)] + [flat]).stats["workloads"] == 5

    w = workload()
    base = types.SimpleNamespace(adapted_scores=lambda w, s, q: (w.prior[s], w.prior[q]))
    unseen = types.SimpleNamespace(name="w", prior=w["prior"], seconds=w["secs"])
    method = compiled_correction.CompiledCorrectionMethod(base, fit, {"w": w["features"]})
    query, support = np.arange(40), np.arange(40, 48)
    before = pairwise_accuracy(w["prior"][query], 1 / w["secs"][query])
    after = pairwise_accuracy(method.scores(unseen, support, query, 0), 1 / w["secs"][query])
    assert after > before + 0.05
    nameless = types.SimpleNamespace(name="other", prior=w["prior"], seconds=w["secs"])
    assert np.array_equal(method.scores(nameless, support, query, 0), w["prior"][query])
    # refitted on the task: a task whose miss is not the guess's turns the guess down
    local = compiled_correction.CompiledCorrectionMethod(base, fit, {"w": w["features"]},
                                                         local=4.0)
    assert local.weight(unseen, support[:2]) == fit.weight  # too few to refit on
    assert local.weight(unseen, np.arange(40, 80)) > 0.5 * fit.weight  # its own kind of miss
    contrary = types.SimpleNamespace(name="w", prior=w["prior"],
                                     seconds=np.exp(-(w["prior"] - 5 * local.guess(unseen))))
    assert local.weight(contrary, np.arange(40, 80)) < 0.5 * fit.weight


def test_model_accuracy_refuses_the_correction_on_its_own_workloads():
    with pytest.raises(SystemExit, match="fitted on these"):
        model_accuracy.main(["--split", "val", "--no-xgb", "--compiled-correction"])


def test_correction_of_a_checkpoint_trained_elsewhere_is_built_for_its_own_cpu(tmp_path):
    import compiled_correction

    own = tmp_path / "data" / "llvm-znver4" / "train-networks"
    own.mkdir(parents=True)
    (own / "meta.json").write_text(json.dumps(
        {"target": json.dumps({"kind": "llvm", "mcpu": "znver4", "num-cores": 2})}))
    target = compiled_correction.validation_target(
        str(own.parent), ["../llvm-icelake-server/train", "train-networks"], "data/other", None)
    assert str(target.attrs["mcpu"]) == "znver4"  # its own split's, not the other CPU's
    assert str(compiled_correction.validation_target(  # no scored data: its own CPU's too
        str(own.parent), ["train-networks"]).attrs["mcpu"]) == "znver4"
    assert compiled_correction.validation_target(  # trained on the scored data: its target
        str(own.parent), ["train-networks"], str(own.parent), "scored") == "scored"
    with pytest.raises(ValueError, match="inside"):
        compiled_correction.validation_target(str(own.parent),
                                              ["../llvm-icelake-server/train"], "data/other",
                                              None)
    with pytest.raises(SystemExit, match="not a --model NAME"):
        model_accuracy.main(["--split", "heldout-nhwc", "--data", "data/llvm-emeraldrapids",
                             "--model", "a=checkpoints/llvm-emeraldrapids-super.ckpt",
                             "--no-xgb", "--limit", "1", "--seeds", "0",
                             "--compiled-correction", "b"])


def test_ridge_leave_one_out_is_the_fit_without_the_row():
    import numpy as np
    import residuals

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(12, 2)), rng.normal(size=12)
    loo = residuals.ridge_loo(x, y, 3.0)
    xi = np.hstack([x, np.ones((12, 1))])
    pen = 3.0 * np.eye(3)
    pen[-1, -1] = 0.0
    keep = np.arange(12) != 4
    w = np.linalg.solve(xi[keep].T @ xi[keep] + pen, xi[keep].T @ y[keep])
    assert loo[4] == pytest.approx(xi[4] @ w)


def test_ranking_ceiling_reads_a_shipped_split():
    import ranking_ceiling

    split = os.path.join(ranking_ceiling.REPO, "data", "llvm-znver4", "heldout")
    times, target = ranking_ceiling.measured_times(split)
    assert target.startswith("llvm -mcpu=znver4") and len(times) == 51
    assert all(s > 0 for w in times.values() for s in w.values())


def test_data_shift_leaves_each_network_out_and_pools_the_scores():
    import numpy as np

    import data_shift

    rng = np.random.default_rng(0)

    def group(n=12):  # per-store features whose first column decides the run time
        feats = [rng.random((2, 4)).astype("float32") for _ in range(n)]
        return feats, np.array([1.0 + f[:, 0].sum() for f in feats])

    generated = {f"conv2d_{i}": group() for i in range(3)}
    heldout = {"a/t1": group(), "a/t2": group(), "b/t1": group()}
    out = data_shift.leave_one_network_out(generated, heldout)
    assert set(out) == {"a", "b", "all"}
    assert out["a"]["other-networks"]["workloads"] == 2
    assert out["all"]["both"]["workloads"] == 3
    for row in out.values():
        for scores in row.values():
            assert 0.0 <= scores["pairwise"] <= 1.0 and 0.0 <= scores["top5_recall"] <= 1.0
    assert "| **all** | 3 |" in data_shift.markdown(
        {"command": "c", "date": "d", "machine": "m", "data": "x", "heldout_target": "t",
         "train_data": "x", "results": out})


def _heldout(root, workloads: list[tuple[str, list[str]]]) -> str:
    """A fake ``data/<platform>`` with a ``train`` and a ``heldout`` split (meta + a file)."""
    for split in ("train", "heldout"):
        (root / split).mkdir(parents=True)
        (root / split / "database_tuning_record.json.gz").write_bytes(b"")
    meta = {"split": "heldout", "workloads": [{"name": n, "networks": nets, "shash": str(i)}
                                              for i, (n, nets) in enumerate(workloads)]}
    (root / "heldout" / "meta.json").write_text(json.dumps(meta))
    return str(root)


def test_networks_pick_their_heldout_convs_and_an_unknown_one_is_named(tmp_path):
    data = _heldout(tmp_path, [("a/c1", ["a"]), ("b/c1", ["b", "c"]), ("d/c1", ["d"])])
    split = os.path.join(data, "heldout")
    assert model_accuracy.network_workloads(split, ["c", "a"]) == ["a/c1", "b/c1"]
    with pytest.raises(SystemExit, match="no workload of it; its networks: a, b, c, d"):
        model_accuracy.network_workloads(split, ["vgg"])


def test_a_fold_trains_on_the_other_networks_convs_only(tmp_path):
    import data_shift

    data = _heldout(tmp_path / "data", [("a/c1", ["a"]), ("b/c1", ["b"]), ("s/c1", ["a", "s"])])
    fold = data_shift.fold_data_dir(data, ["a"], str(tmp_path / "work"))
    others = os.path.join(fold, data_shift.OTHERS_SPLIT)
    with open(os.path.join(others, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    assert [w["name"] for w in meta["workloads"]] == ["b/c1"]  # a's, shared ones too, gone
    assert meta["split"] == data_shift.OTHERS_SPLIT
    assert os.path.realpath(os.path.join(fold, "train")) == os.path.realpath(
        os.path.join(data, "train"))
    assert os.path.islink(os.path.join(others, "database_tuning_record.json.gz"))
    stamp = os.stat(os.path.join(others, "meta.json")).st_mtime_ns
    assert data_shift.fold_data_dir(data, ["a"], str(tmp_path / "work")) == fold
    assert os.stat(os.path.join(others, "meta.json")).st_mtime_ns == stamp  # cache holds
    with pytest.raises(SystemExit, match="not a network of"):
        data_shift.fold_data_dir(data, ["vgg"], str(tmp_path / "work"))


def test_an_ensemble_names_methods_already_scored():
    methods = {"super": 0, "plain": 0, "xgb-Xfer": 0}
    expect = [("both", ["super", "plain"])]
    assert model_accuracy._ensembles(["both=super+plain"], methods) == expect
    nested = model_accuracy._ensembles(["both=super+plain", "mix=both+xgb-Xfer"], methods)
    assert nested == [*expect, ("mix", ["both", "xgb-Xfer"])]  # an earlier ensemble joins
    with pytest.raises(SystemExit, match="no method 'both'"):  # named later: not yet
        model_accuracy._ensembles(["mix=both+xgb-Xfer", "both=super+plain"], methods)
    assert "both" not in methods
    corrected = {"super+asm": 0, "plain+asm": 0}
    assert model_accuracy._ensembles(["pair=super+asm,plain+asm"], corrected) == [
        ("pair", ["super+asm", "plain+asm"])]  # names with a '+': commas between them
    for spec, message in [("both=super", "two or more"), ("=super+plain", "two or more"),
                          ("both=super+gcn", "no method 'gcn'"), ("plain=super+xgb-Xfer", "taken")]:
        with pytest.raises(SystemExit, match=message):
            model_accuracy._ensembles([spec], methods)
