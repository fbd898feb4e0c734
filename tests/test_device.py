"""The one device setting: names, the CPU fallback, a clear line for an absent GPU, and the
cost model and GP running where it says."""

from __future__ import annotations

import pytest
import torch

from metatune.device import DeviceUnavailableError, check_device_name, resolve_device
from metatune.errors import ConfigError
from tuner.app.config import load_tune_config


def test_names_and_fallback():
    assert check_device_name("ROCm") == "rocm"
    with pytest.raises(ConfigError, match="auto, cpu, cuda, rocm"):
        load_tune_config(overrides=["device=tpu"])
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("name", ["cuda", "rocm"])
def test_absent_gpu_is_one_clear_line(name):
    with pytest.raises(DeviceUnavailableError, match=f"device={name}: PyTorch .* sees no GPU"
                                                     ".*device=auto"):
        resolve_device(name)


def test_cost_model_follows_the_device(context_and_candidates):
    from tuner.models.cost_model import MetaTuneCostModel
    from tuner.models.trained import load_model

    ctx, cands = context_and_candidates
    device = resolve_device("auto")
    model = MetaTuneCostModel(model=load_model(None, from_scratch=True, hidden=16),
                              device=device)
    assert next(model.net.parameters()).device.type == device.type
    scores = model.predict(ctx, cands)
    assert scores.shape == (len(cands),)
