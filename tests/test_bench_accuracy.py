"""``bench.model_accuracy``'s choice of workloads and target (validation sets, the data's
CPU), its ensembles, and its page."""

from __future__ import annotations

import json
import os

import pytest

from bench import model_accuracy
from bench.accuracy import checkpoints
from bench.accuracy.page import markdown
from bench.common import REPO


def _sidecar(path, data_dir: str, names: list[str], splits: list[str] | None = None) -> str:
    data = {"dir": data_dir, "val_workloads": names, **({"splits": splits} if splits else {})}
    with open(path.with_suffix(".json"), "w", encoding="utf-8") as f:
        json.dump({"data": data}, f)
    return str(path)


def test_validation_workloads_must_agree_and_come_from_the_data(tmp_path):
    data = os.path.join(REPO, "data", "x")
    a = _sidecar(tmp_path / "a.ckpt", "data/x", ["w1", "w2"])
    b = _sidecar(tmp_path / "b.ckpt", "data/x", ["w2", "w1"])
    assert checkpoints.validation_workloads([a, b], data) == (["w1", "w2"], ["train"])
    other = _sidecar(tmp_path / "c.ckpt", "data/x", ["w3"])
    with pytest.raises(SystemExit, match="other validation workloads"):
        checkpoints.validation_workloads([a, other], data)
    both = _sidecar(tmp_path / "e.ckpt", "data/x", ["w1", "w1_nhwc"], ["train", "train-nhwc"])
    assert checkpoints.validation_workloads([both], data)[1] == ["train", "train-nhwc"]
    with pytest.raises(SystemExit, match="splits"):
        checkpoints.validation_workloads([a, _sidecar(tmp_path / "f.ckpt", "data/x",
                                                         ["w1", "w2"], ["train-nhwc"])], data)
    elsewhere = _sidecar(tmp_path / "d.ckpt", "data/y", ["w1", "w2"])
    with pytest.raises(SystemExit, match="trained on data/y"):
        checkpoints.validation_workloads([elsewhere], data)
    with pytest.raises(SystemExit, match="cannot read"):
        checkpoints.validation_workloads([str(tmp_path / "none.ckpt")], data)
    with pytest.raises(SystemExit, match="^--gp: cannot read"):
        checkpoints.validation_workloads([str(tmp_path / "none.ckpt")], data, "--gp")


def test_the_target_is_the_datas_own(tmp_path):
    assert checkpoints.data_target(str(tmp_path)) == "llvm"
    target = {"kind": "llvm", "mcpu": "haswell", "num-cores": 2, "keys": ["cpu"]}
    (tmp_path / "meta.json").write_text(json.dumps({"target": json.dumps(target)}))
    assert json.loads(checkpoints.data_target(str(tmp_path))) == {
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
    checkpoints.refuse_trained_on([str(ckpt)], ["n/w2"])
    checkpoints.refuse_trained_on([str(tmp_path / "no-sidecar.ckpt")], ["n/w1"])
    with pytest.raises(SystemExit, match="trained on 1 of the scored.*leave_out_networks"):
        checkpoints.refuse_trained_on([str(ckpt)], ["n/w1", "n/w2"])
    # --seen-ok: counted, for the page, instead of refused
    assert checkpoints.refuse_trained_on([str(ckpt)], ["n/w1", "n/w2"], allow=True) == {
        str(ckpt): 1}


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
    assert checkpoints.network_workloads(split, ["c", "a"]) == ["a/c1", "b/c1"]
    with pytest.raises(SystemExit, match="no workload of it; its networks: a, b, c, d"):
        checkpoints.network_workloads(split, ["vgg"])


def test_an_ensemble_names_methods_already_scored():
    methods = {"super": 0, "plain": 0, "xgb-Xfer": 0}
    expect = [("both", ["super", "plain"])]
    assert model_accuracy.ensembles(["both=super+plain"], methods) == expect
    nested = model_accuracy.ensembles(["both=super+plain", "mix=both+xgb-Xfer"], methods)
    assert nested == [*expect, ("mix", ["both", "xgb-Xfer"])]  # an earlier ensemble joins
    with pytest.raises(SystemExit, match="no method 'both'"):  # named later: not yet
        model_accuracy.ensembles(["mix=both+xgb-Xfer", "both=super+plain"], methods)
    assert "both" not in methods
    with_gp = {"super+gp": 0, "plain+gp": 0}
    assert model_accuracy.ensembles(["pair=super+gp,plain+gp"], with_gp) == [
        ("pair", ["super+gp", "plain+gp"])]  # names with a '+': commas between them
    for spec, message in [("both=super", "two or more"), ("=super+plain", "two or more"),
                          ("both=super+gcn", "no method 'gcn'"), ("plain=super+xgb-Xfer", "taken")]:
        with pytest.raises(SystemExit, match=message):
            model_accuracy.ensembles([spec], methods)


def _summary(methods: list[str], ks: list[str]) -> dict:
    cell = {"median": 0.75, "min": 0.5, "max": 1.0}
    return {m: {k: {metric: cell for metric in ("mse", "mse_d", "pairwise", "top5_recall")}
                for k in ks} for m in methods}


def test_the_page_names_its_data_methods_and_every_metric_per_k():
    doc = {"title": "Accuracy", "command": "python -m bench.model_accuracy --limit 6",
           "date": "d", "machine": "m", "data": "data/llvm-a", "target": "llvm -mcpu=a",
           "train_data": "data/llvm-b", "xfer_splits": ["train"], "split": "heldout-nhwc",
           "workloads": 6, "networks": None, "query": 32, "seeds": [0, 1],
           "notes": {"super": "`checkpoints/s.ckpt`: super graph"},
           "summary": _summary(["super", "xgb"], ["0", "8"])}
    page = markdown(doc)
    assert page.startswith("# Accuracy\n") and "`python -m bench.model_accuracy --limit 6`" in page
    assert "6 held-out workloads (conv tasks of alexnet, resnet-18, vgg-16, squeezenet in NHWC" \
        in page
    assert "trained on `data/llvm-b`, not on this data" in page  # across platforms
    assert "- `super`: `checkpoints/s.ckpt`: super graph" in page
    assert "- `xgb`: MetaSchedule XGBModel trained from scratch" in page  # a built-in note
    for title in ("## MSE (lower", "## MSE(D)", "## Pairwise", "## Top-5"):
        assert title in page
    assert page.count("| method | k=0 | k=8 |") == 4
    assert page.count("| super | 0.750 (0.500-1.000) | 0.750 (0.500-1.000) |") == 4
    doc.update(split="val", train_data="data/llvm-a")
    page = markdown(doc)
    assert "6 validation workloads of the training split" in page
    assert "across platforms" not in page


def test_a_checkpoints_adaptation_is_one_line():
    from bench.accuracy.page import describe, scale
    from metatune.maml import AdaptConfig

    assert describe(AdaptConfig(scope="last_gcn", steps=50, lr=0.05, loss="mse")) == (
        "the head and the last GCN layer, 50 steps, lr 0.05, mse loss")
    assert scale(None) == ""
    assert scale({"workloads": 12, "slope": 2.0, "intercept": -0.5}) == (
        "; zero-shot scale calibrated on 12 validation workloads (x 2.000 + -0.500)")
