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


def test_the_target_is_the_datas_own(tmp_path):
    assert model_accuracy.data_target(str(tmp_path)) == "llvm"
    target = {"kind": "llvm", "mcpu": "haswell", "num-cores": 2, "keys": ["cpu"]}
    (tmp_path / "meta.json").write_text(json.dumps({"target": json.dumps(target)}))
    assert json.loads(model_accuracy.data_target(str(tmp_path))) == {
        "kind": "llvm", "mcpu": "haswell", "num-cores": 2}


def test_val_split_refuses_xgb():
    with pytest.raises(SystemExit, match="--no-xgb"):
        model_accuracy.main(["--split", "val"])


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
