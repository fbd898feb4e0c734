"""Whole-network tuning (slow: minutes each; run with make test-all or pytest -m slow)."""

from __future__ import annotations

import pytest

from tuner.app.config import load_tune_config
from tuner.app.run import run_tune


@pytest.mark.slow
@pytest.mark.parametrize("network", ["alexnet", "resnet-18"])
def test_network_tunes_checks_and_beats_untuned(network, tmp_path):
    report = run_tune(load_tune_config(overrides=[
        f"network={network}", f"work_dir={tmp_path}", "trials=64", "progress=false"]))
    assert report["trials_total"] >= 64 - 16 and report["failures"] < report["trials_run"]
    assert report["check_error"] is not None and report["check_error"] < 1e-3
    assert report["latency_ms"]["tuned"] < report["latency_ms"]["untuned"]
