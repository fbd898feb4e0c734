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
    from tuner.models.cost_model import MetaTuneCostModel, load_model

    ctx, cands = context_and_candidates
    device = resolve_device("auto")
    model = MetaTuneCostModel(model=load_model(None, from_scratch=True, hidden=16),
                              device=device)
    assert next(model.net.parameters()).device.type == device.type
    scores = model.predict(ctx, cands)
    assert scores.shape == (len(cands),)


def test_gpu_check_report_compares_devices(monkeypatch):
    """scripts/gpu_check.py: medians leave out each run's first round, the page gives the
    GPU / CPU ratio, and a run of one round (no medians) still makes a page."""
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.syspath_prepend(os.path.join(root, "bench"))
    monkeypatch.syspath_prepend(os.path.join(root, "scripts"))
    from gpu_check import page, summarize

    def run(device, search):
        return {"device": device, "best_ms": 1.0, "tuning_seconds": 10.0,
                "rounds": [{"search_s": 9.0, "update_s": 1.0, "measure_s": 2.0}]
                + [{"search_s": s, "update_s": s / 10, "measure_s": 2.0} for s in search]}

    s = summarize([run("cuda", [1.0, 3.0]), run("cpu", [2.0, 4.0])])
    assert s["cuda"]["median_search_s"] == 2.0 and s["cpu"]["median_search_s"] == 3.0
    assert s["cuda"]["first_round_search_s"] == [9.0]
    prov = {"command": "python scripts/gpu_check.py", "date": "d", "machine": "m"}
    doc = {"provenance": prov, "gpu": "g", "torch": "t", "preset": "p", "trials": 48,
           "batch": 16, "seeds": [0], "summary": s, "runs": [{"checkpoint": "c"}]}
    assert "search 0.67x" in page(doc)
    doc["summary"] = summarize([run("cpu", [])])
    assert "| cpu | 1 | 0 | - | - | - |" in page(doc)
