"""Failure monitor: every failed round is reported; repeated empty rounds stop tuning."""

from __future__ import annotations

import json

import pytest
from tvm.s_tir import meta_schedule as ms

from metatune.errors import TuningStalledError
from metatune.records import measured_seconds
from tuner.app.monitor import FailureMonitor, ProgressMonitor, read_curves


def _results(n_ok: int, n_build_fail: int):
    builds = [ms.builder.BuilderResult("/tmp/a.tar", None) for _ in range(n_ok)]
    builds += [ms.builder.BuilderResult(None, "LocalBuilder: Timeout") for _ in range(n_build_fail)]
    runs = [ms.runner.RunnerResult([0.002, 0.004], None) for _ in range(n_ok)]
    runs += [ms.runner.RunnerResult(None, "not run") for _ in range(n_build_fail)]
    return builds, runs


def test_measured_seconds_is_the_one_failure_rule():
    def seconds(result):
        return measured_seconds(result.run_secs, result.error_msg)

    assert seconds(ms.runner.RunnerResult([0.002, 0.004], None)) == pytest.approx(0.003)
    assert seconds(ms.runner.RunnerResult(None, "boom")) is None
    assert seconds(ms.runner.RunnerResult([1e10], None)) is None
    assert measured_seconds([0.5, 1e10]) is None and measured_seconds([0.0]) is None
    assert measured_seconds([]) is None and measured_seconds(None) is None


def test_stalls_after_consecutive_empty_rounds(caplog):
    mon = FailureMonitor(max_failed_rounds=2, task_names=["conv"])
    mon.observe(0, *_results(0, 4))  # first empty round: warn only
    assert "4 of 4 candidates failed" in caplog.text and "Timeout" in caplog.text
    mon.observe(0, *_results(1, 3))  # one valid result resets the count
    mon.observe(0, *_results(0, 4))
    with pytest.raises(TuningStalledError, match="2 rounds in a row.*Timeout.*saved"):
        mon.observe(0, *_results(0, 4))
    assert mon.failures == 15 and mon.measured == 16


def test_progress_tracks_best_and_network_estimate(tmp_path):
    mon = ProgressMonitor(task_names=["a", "b"], task_weights=[2, 1], best_seconds=[None, 0.010],
                          budget=8, work_dir=str(tmp_path), trials_before=5, show_bar=False)
    assert mon.estimated_network_seconds() is None
    mon.observe(0, *_results(2, 1))
    assert mon.best[0] == pytest.approx(0.003)
    assert mon.estimated_network_seconds() == pytest.approx(2 * 0.003 + 0.010)
    rows = read_curves(str(tmp_path))
    assert rows[-1]["trial"] == 8 and rows[-1]["valid"] == 2
    assert rows[-1]["network_estimate_ms"] == pytest.approx(16.0)
    json.dumps(rows)
