"""The zero-shot scale: fitted on validation samples, folded into the head, kept in the
checkpoint; rankings untouched; bad fits refused with a message that says what to do."""

from __future__ import annotations

import pytest
import torch

from metatune.calibration import MIN_SAMPLES, fit_scale, fold_into_head, score_graphs
from metatune.errors import CalibrationError, ConfigError
from metatune.graph import NODE_FEATURES
from metatune.model import MetaTuneNet


def test_fit_recovers_an_affine_map():
    x = torch.linspace(-1.0, 2.0, 50)
    cal = fit_scale(x, 0.4 * x + 0.15, workloads=3)
    assert cal.slope == pytest.approx(0.4) and cal.intercept == pytest.approx(0.15)
    assert cal.mse_after == pytest.approx(0.0, abs=1e-12) and cal.mse_before > 0.1
    assert (cal.samples, cal.workloads) == (50, 3)
    assert set(cal.to_dict()) == {"slope", "intercept", "samples", "workloads", "mse_before",
                                  "mse_after"}


@pytest.mark.parametrize("scores, targets, message", [
    (torch.ones(MIN_SAMPLES - 1), torch.ones(MIN_SAMPLES - 1), "at least"),
    (torch.ones(40), torch.rand(40), "same score"),
    (torch.arange(40.0), -torch.arange(40.0), "backwards"),
])
def test_bad_fits_are_refused(scores, targets, message):
    with pytest.raises(CalibrationError, match=message):
        fit_scale(scores, targets, workloads=1)


def test_folding_maps_every_score_and_keeps_the_ranking(tiny_data):
    from metatune.dataset import load_split

    torch.manual_seed(0)
    graphs = [g for w in load_split(str(tiny_data / "ds" / "train"), "super",
                                    str(tiny_data / "cache")) for g in w.graphs]
    net = MetaTuneNet(NODE_FEATURES, 8, 2, 8)
    before = score_graphs(net, graphs, batch_size=5)  # several batches
    cal = fit_scale(before.repeat(3), torch.rand(3 * len(before)), workloads=1)
    cal = type(cal)(**{**cal.__dict__, "slope": 0.5, "intercept": 0.1})
    fold_into_head(net.head, cal)
    after = score_graphs(net, graphs)
    assert torch.allclose(after, 0.5 * before + 0.1, atol=1e-6)
    assert torch.equal(torch.argsort(after), torch.argsort(before))


def test_calibrated_head_travels_in_the_checkpoint(tiny_data, tmp_path, caplog):
    """``run_train``'s step: the fit is recorded in the settings, the tuner's reader loads
    the calibrated weights; with too few validation samples the head is left as it was."""
    from lightning_modules.app import _save_plain, calibrate_scale
    from lightning_modules.meta import MetaModule
    from metatune.checkpoint import load
    from metatune.dataset import load_split

    torch.manual_seed(0)
    workloads = load_split(str(tiny_data / "ds" / "train"), "super", str(tiny_data / "cache"))
    meta = MetaModule(NODE_FEATURES, hidden=8, head_hidden=8, graph="super")
    x = torch.cat([g.x for w in workloads for g in w.graphs])
    meta.net.set_normalization(x.mean(0), x.std(0))
    graphs = [g for w in workloads for g in w.graphs]
    y = torch.cat([g.y.view(-1) for g in graphs])
    raw = score_graphs(meta.net, graphs)
    if torch.corrcoef(torch.stack([raw, y]))[0, 1] < 0:  # untrained: make it rank forwards
        with torch.no_grad():
            meta.net.head[-1].weight.neg_()
            meta.net.head[-1].bias.neg_()
        raw = score_graphs(meta.net, graphs)
    assert calibrate_scale(meta, workloads[:1]) == {}  # 6 samples: too few
    assert meta.hparams.calibration is None and "uncalibrated" in caplog.text
    metrics = calibrate_scale(meta, workloads * 3)  # the same samples thrice: enough
    cal = meta.hparams.calibration
    assert metrics["calibration/slope"] == cal["slope"] and cal["samples"] == 3 * len(graphs)
    _save_plain(meta, str(tmp_path / "cal.ckpt"))
    net, _, hparams = load(str(tmp_path / "cal.ckpt"))
    assert hparams["calibration"] == cal
    calibrated = cal["slope"] * raw + cal["intercept"]
    assert torch.allclose(score_graphs(net, graphs), calibrated, atol=1e-4)
    # calibrating again fits the meta-trained scores, not the calibrated ones: no change
    # (float32 round trips through the head, and an untrained net's scores can spread
    # little: the scores compared to a thousandth, the slope to a percent)
    calibrate_scale(meta, workloads * 3)
    assert meta.hparams.calibration["slope"] == pytest.approx(cal["slope"], rel=1e-2)
    assert torch.allclose(score_graphs(meta.net, graphs), calibrated, rtol=1e-3, atol=1e-3)
    # a fit that fails keeps the calibration the head carries, and its record
    assert calibrate_scale(meta, workloads[:1]) == {} and "earlier calibration kept" in caplog.text
    assert meta.hparams.calibration["slope"] == pytest.approx(cal["slope"], rel=1e-2)
    assert torch.allclose(score_graphs(meta.net, graphs), calibrated, rtol=1e-3, atol=1e-3)


def test_an_existing_checkpoint_is_recalibrated_with_its_provenance(tiny_data, tmp_path):
    """``pretrained=<ckpt> pretrain.epochs=0 meta.steps=0`` keeps a checkpoint's network
    (calibrating it again) and nests its provenance; another adaptation is refused."""
    import json

    from lightning_modules.app import run_train
    from lightning_modules.config import load_train_config
    from tests.test_train import _overrides

    first = run_train(load_train_config(overrides=_overrides(
        tiny_data, out=tmp_path / "a.ckpt", **{"pretrain.epochs": 1, "meta.steps": 2,
                                               "meta.val_every": 2})))["checkpoint"]
    again = run_train(load_train_config(overrides=_overrides(
        tiny_data, out=tmp_path / "b.ckpt", pretrained=first, **{"pretrain.epochs": 0,
                                                                  "meta.steps": 0})))
    with open(tmp_path / "b.json") as f:
        doc = json.load(f)
    assert doc["pretrained_from"]["checkpoint"] == "a.ckpt"
    assert doc["pretrained_from"]["config"]["meta"]["steps"] == 2
    from metatune.checkpoint import load

    a, b = load(first)[0], load(again["checkpoint"])[0]
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=False):
        assert torch.equal(p, q), name  # tiny data: no validation workloads, nothing fitted
    with pytest.raises(ConfigError, match="meta.adapt.steps=5"):
        run_train(load_train_config(overrides=_overrides(
            tiny_data, out=tmp_path / "c.ckpt", pretrained=first,
            **{"pretrain.epochs": 0, "meta.steps": 0, "meta.adapt.steps": 9})))
