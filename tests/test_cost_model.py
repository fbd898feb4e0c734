"""The MetaTune PyCostModel: predict contract, online update, save/load, checkpoint errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tvm.s_tir import meta_schedule as ms

from tuner.models.cost_model import CheckpointError, MetaTuneCostModel, load_net


def _model() -> MetaTuneCostModel:
    torch.manual_seed(0)
    return MetaTuneCostModel(net=load_net(None, from_scratch=True, hidden=16), adapt_steps=30,
                             adapt_lr=0.05)


def test_predict_contract(context_and_candidates):
    ctx, cands = context_and_candidates
    model = _model()
    scores = model.predict(ctx, cands)
    assert isinstance(scores, np.ndarray) and scores.dtype == np.float64
    assert scores.shape == (len(cands),) and np.isfinite(scores).all()
    # order kept: scoring a reversed list gives the reversed scores
    assert np.allclose(model.predict(ctx, cands[::-1]), scores[::-1], atol=1e-6)


def test_update_moves_predictions_toward_measurements(context_and_candidates):
    ctx, cands = context_and_candidates
    model = _model()
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
    other = MetaTuneCostModel(net=load_net(None, from_scratch=True, hidden=16))
    other.load(path)
    assert np.allclose(other.predict(ctx, cands), model.predict(ctx, cands))


def test_missing_and_corrupt_checkpoints(tmp_path):
    with pytest.raises(CheckpointError, match="from scratch"):
        load_net(str(tmp_path / "none.ckpt"))
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="retrain"):
        load_net(str(bad))
    model = MetaTuneCostModel(net=load_net(None, from_scratch=True, hidden=16))
    with pytest.raises(Exception, match="cannot load the MetaTune cost model"):
        model.load(str(bad))  # crosses TVM's FFI: the message survives, the type does not
