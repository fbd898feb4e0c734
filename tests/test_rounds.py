"""Per-round timing and batch-accuracy bookkeeping; tune presets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from metatune.errors import ConfigError
from tuner.app.config import load_tune_config, preset_of
from tuner.app.rounds import RoundClock, RoundMonitor, batch_accuracy, batch_exploration


def test_batch_accuracy_perfect_and_reversed():
    secs = [1.0, 2.0, 4.0, 8.0]
    target = 1.0 / np.asarray(secs)
    good = batch_accuracy(target, secs, 1.0)
    assert good["mse"] == 0 and good["mse_d"] == 0 and good["pairwise"] == 1.0
    assert batch_accuracy(-target, secs, 1.0)["pairwise"] == 0.0


def test_batch_exploration_measures_distances_in_knob_space():
    before = np.array([[0.0, 0.0], [1.0, 0.0]])
    batch = np.array([[0.0, 0.0], [1.0, 1.0]])
    got = batch_exploration(batch, before)
    assert got["novelty"] == 0.5  # one candidate measured already, one at distance 1
    assert got["spread"] == np.sqrt(2.0)
    assert batch_exploration(batch, np.zeros((0, 2))) == {"spread": np.sqrt(2.0)}
    assert batch_exploration(batch[:1], before) == {"novelty": 0.0}


def test_round_monitor_writes_rows_and_summary(tmp_path):
    clock = RoundClock()
    monitor = RoundMonitor(clock, ["t0"], str(tmp_path))
    for _ in range(2):
        clock.start_search()
        clock.end_search()
        clock.search_seconds = 1.0
        clock.search_end -= 5.0  # as if the measurement took 5 s
        clock.measured = clock.search_end + 5.0
        clock.accuracy = {"mse": 0.1, "mse_d": 0.2, "pairwise": 0.7}
        monitor.observe(0, [None] * 4, [None] * 4)
    rows = [json.loads(line) for line in open(tmp_path / "rounds.jsonl")]
    assert [r["trial"] for r in rows] == [4, 8]
    assert rows[0]["search_s"] == 1.0 and rows[0]["measure_s"] == pytest.approx(5.0, abs=0.01)
    summary = monitor.summary()
    assert summary["rounds"] == 2 and summary["median_pairwise"] == 0.7
    assert 0.19 < summary["median_overhead_ratio"] < 0.3


def test_presets_set_model_search_and_graph():
    cfg = load_tune_config(overrides=["preset=meta-BO"])
    assert (cfg.cost_model, cfg.search, cfg.metatune.graph) == ("metatune", "bo", "plain")
    assert preset_of(cfg) == "meta-BO"
    assert preset_of(load_tune_config(overrides=["preset=xgb-Xfer"])) == "xgb-Xfer"
    # an explicit setting wins over the preset
    cfg = load_tune_config(overrides=["preset=xgb", "search=replay"])
    assert cfg.search == "replay" and preset_of(cfg) is None


@pytest.mark.parametrize("override, message", [
    ("preset=autotvm", "preset"), ("search_params.bo.acquisition=ei", "acquisition"),
    ("search_params.bo.engine=fast", "engine"), ("search_params.bo.max_history=2", "max_history"),
])
def test_bad_bo_settings(override, message):
    with pytest.raises(ConfigError, match=message):
        load_tune_config(overrides=[override])
