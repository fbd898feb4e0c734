"""The MetaTune PyCostModel: predict contract, online update, save/load, checkpoint errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tvm.s_tir import meta_schedule as ms

from metatune.errors import CheckpointError
from metatune.maml import AdaptConfig
from tuner.models.cost_model import MetaTuneCostModel
from tuner.models.trained import load_model, load_net


def _fresh(**adapt) -> object:
    return load_model(None, from_scratch=True, hidden=16, adapt=AdaptConfig(**adapt))


def _model(scope: str = "head") -> MetaTuneCostModel:
    torch.manual_seed(0)
    return MetaTuneCostModel(model=_fresh(steps=30, lr=0.05, scope=scope))


def test_predict_contract(context_and_candidates):
    ctx, cands = context_and_candidates
    model = _model()
    scores = model.predict(ctx, cands)
    assert isinstance(scores, np.ndarray) and scores.dtype == np.float64
    assert scores.shape == (len(cands),) and np.isfinite(scores).all()
    # order kept: scoring a reversed list gives the reversed scores
    assert np.allclose(model.predict(ctx, cands[::-1]), scores[::-1], atol=1e-6)


@pytest.mark.parametrize("scope", ["head", "last_gcn"])
def test_update_moves_predictions_toward_measurements(context_and_candidates, scope):
    ctx, cands = context_and_candidates
    model = _model(scope)
    rng = np.random.default_rng(0)
    secs = rng.uniform(1e-3, 1e-2, len(cands))
    targets = secs.min() / secs  # higher is better: the fastest scores 1
    before = np.mean((model.predict(ctx, cands) - targets) ** 2)
    results = [ms.runner.RunnerResult([float(s)], None) for s in secs]
    results[0] = ms.runner.RunnerResult(None, "failed")  # failures are skipped
    model.update(ctx, cands, results)
    after = np.mean((model.predict(ctx, cands)[1:] - targets[1:]) ** 2)
    assert after < before


def test_save_load_round_trip(context_and_candidates, tmp_path):
    ctx, cands = context_and_candidates
    model = _model()
    model.update(ctx, cands, [ms.runner.RunnerResult([1e-3 * (i + 1)], None)
                              for i in range(len(cands))])
    path = str(tmp_path / "cm.pt")
    model.save(path)
    other = MetaTuneCostModel(model=_fresh())
    other.load(path)
    assert np.allclose(other.predict(ctx, cands), model.predict(ctx, cands))


def test_missing_and_corrupt_checkpoints(tmp_path):
    with pytest.raises(CheckpointError, match="from scratch"):
        load_net(str(tmp_path / "none.ckpt"))
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="retrain"):
        load_net(str(bad))
    model = MetaTuneCostModel(model=_fresh())
    with pytest.raises(Exception, match="cannot load the MetaTune cost model"):
        model.load(str(bad))  # crosses TVM's FFI: the message survives, the type does not


def test_shipped_checkpoint_loads_for_real_and_refuses_the_other_graph_mode():
    from metatune.config import default_checkpoint
    from metatune.graph import FEATURE_VERSION

    model = load_model(default_checkpoint(graph="super"), graph="super")
    assert model.graph == "super" and model.inner.cfg.steps >= 1
    assert sum(p.numel() for p in model.net.parameters()) > 1000
    with pytest.raises(CheckpointError, match="trained on super graphs, not plain"):
        load_net(default_checkpoint(graph="super"), graph="plain")
    assert FEATURE_VERSION >= 1


def test_the_tuner_loads_a_checkpoint_without_lightning():
    import os
    import subprocess
    import sys

    from metatune.config import default_checkpoint

    code = ("import sys; from tuner.models.trained import load_model; "
            f"m = load_model({default_checkpoint(graph='super')!r}, graph='super'); "
            "print(m.graph, any('lightning' in k for k in sys.modules))")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=repo).stdout.split()
    assert out == ["super", "False"]  # Lightning costs seconds of tune.py's start-up


def test_an_old_checkpoints_adaptation_settings_are_read_as_before():
    from metatune.checkpoint import build
    from metatune.graph import NODE_FEATURES

    net, inner = build({"in_features": NODE_FEATURES, "alpha": 0.1, "inner_steps": 3})
    assert (inner.cfg.lr, inner.cfg.steps, inner.cfg.scope) == (0.1, 3, "head")
    assert net.head[0].out_features == 64  # the shape's defaults where none was saved
    from lightning_modules.meta import MetaModule

    module = MetaModule(NODE_FEATURES, alpha=0.1, inner_steps=3)
    assert module.hparams.adapt == inner.cfg.to_dict()  # saved normalized, as it adapts


def test_checkpoint_with_unknown_settings_or_stray_weights_is_refused(tmp_path):
    from metatune.config import default_checkpoint

    blob = torch.load(default_checkpoint(graph="plain"), map_location="cpu", weights_only=True)
    blob["hyper_parameters"]["adapt"]["warp"] = 9
    odd = tmp_path / "odd.ckpt"
    torch.save(blob, odd)
    with pytest.raises(CheckpointError, match="settings this MetaTune does not understand"):
        load_net(str(odd), graph="plain")
    del blob["hyper_parameters"]["adapt"]["warp"]
    blob["state_dict"]["extra.weight"] = torch.zeros(1)
    torch.save(blob, odd)
    with pytest.raises(CheckpointError, match="unexpected key.*extra.weight"):
        load_net(str(odd), graph="plain")


def test_every_shipped_checkpoint_loads_with_its_retired_settings_off():
    """The shipped checkpoints store retired settings at their off value (``context=0``,
    ``meta_sgd=false``, ``zero_shot_weight=0``): they load, the settings dropped."""
    import glob

    from metatune.checkpoint import load, read
    from metatune.config import REPO_ROOT

    paths = sorted(glob.glob(f"{REPO_ROOT}/checkpoints/*.ckpt"))
    assert paths
    for path in paths:
        hparams, _ = read(path)
        net, inner, _ = load(path)
        assert inner.cfg.loss == "mse+rank" and inner.cfg.scope == "head", path
        assert "context" not in inner.cfg.to_dict() and not list(inner.parameters())
        if "zero_shot_weight" in hparams:
            assert hparams["zero_shot_weight"] == 0.0
        load_model(path, graph=hparams["graph"])


@pytest.mark.parametrize("where, key, value", [
    ("adapt", "context", 32), ("adapt", "meta_sgd", True), (None, "zero_shot_weight", 1.0),
])
def test_a_checkpoint_trained_with_a_retired_option_on_is_refused(tmp_path, where, key, value):
    from metatune.config import default_checkpoint

    blob = torch.load(default_checkpoint(graph="plain"), map_location="cpu", weights_only=True)
    (blob["hyper_parameters"][where] if where else blob["hyper_parameters"])[key] = value
    odd = tmp_path / "odd.ckpt"
    torch.save(blob, odd)
    with pytest.raises(CheckpointError, match=f"{key}={value}, an option retired.*retrain") as err:
        load_net(str(odd), graph="plain")
    assert "\n" not in str(err.value) and "da885ad" in str(err.value)


def test_a_checkpoint_adapting_with_a_retired_loss_is_refused(tmp_path):
    from metatune.config import default_checkpoint

    blob = torch.load(default_checkpoint(graph="plain"), map_location="cpu", weights_only=True)
    blob["hyper_parameters"]["adapt"]["loss"] = "list"
    odd = tmp_path / "odd.ckpt"
    torch.save(blob, odd)
    with pytest.raises(CheckpointError, match="loss 'list' is retired"):
        load_net(str(odd), graph="plain")


def test_checkpoint_with_weights_of_another_shape_is_refused(tmp_path):
    from metatune.config import default_checkpoint

    blob = torch.load(default_checkpoint(graph="plain"), map_location="cpu", weights_only=True)
    blob["hyper_parameters"]["hidden"] = 7
    odd = tmp_path / "odd.ckpt"
    torch.save(blob, odd)
    with pytest.raises(CheckpointError, match="size mismatch.*retrain"):
        load_net(str(odd), graph="plain")


def test_checkpoint_of_another_feature_version_is_refused(tmp_path):
    from metatune.config import default_checkpoint

    blob = torch.load(default_checkpoint(graph="plain"), map_location="cpu",
                      weights_only=False)
    blob["hyper_parameters"]["feature_version"] = 0
    old = tmp_path / "old.ckpt"
    torch.save(blob, old)
    with pytest.raises(CheckpointError, match="features version 0.*retrain"):
        load_net(str(old), graph="plain")


def test_checkpoint_from_another_cpu_loads_with_a_note():
    from tvm.target import Target

    from metatune.config import default_checkpoint

    model = load_model(default_checkpoint(graph="super"), graph="super")
    assert model.platform.get("target")  # where its training data was measured
    here = Target({"kind": "llvm", "mcpu": "znver3", "num-cores": 2})
    note = model.platform_note(here)
    assert note and "-mcpu=znver3" in note and "collect its data" in note
    trained_on = Target(model.platform["target"])
    assert model.platform_note(trained_on) is None
    assert model.covers(trained_on) and not model.covers(here)
    # where this CPU has a checkpoint of its own, the note points to it
    note = model.platform_note(here, own_checkpoint="checkpoints/llvm-znver3-super.ckpt")
    assert "llvm-znver3-super.ckpt" in note and "collect its data" not in note
    # where its data is collected but no checkpoint trained, the note says to train one
    note = model.platform_note(
        here, train_command="python train.py data_dir=data/llvm-znver3 graph=super")
    assert "python train.py data_dir=data/llvm-znver3 graph=super" in note
    assert "collect its data" not in note


def test_a_model_never_trained_on_the_runs_layout_says_so():
    from metatune.config import default_checkpoint

    model = load_model(default_checkpoint(graph="super"), graph="super")
    assert model.layouts() == ["NCHW"]  # recorded by newer checkpoints; NCHW before
    assert model.layout_note("NCHW") is None
    note = model.layout_note("NHWC")
    assert "NCHW convolutions only" in note and "splits=[train-networks-nhwc]" in note
    model.platform["layouts"] = ["NCHW", "NHWC"]
    assert model.layout_note("NHWC") is None


