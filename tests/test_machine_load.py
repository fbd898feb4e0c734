"""bench.machine_load: other processes' CPU time is counted, the benchmark's own is not."""

from __future__ import annotations

import os
import sys

import pytest

import bench.machine_load as ml

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_counts_only_foreign_processes(monkeypatch):
    me = os.getpid()
    # (pid -> (parent, CPU seconds)) at each sample: the meter's own child (50) and
    # grandchild (51) burn 10 s; another tree (70, 71) burns 3 s; 80 appears mid-run
    snaps = [
        {1: (0, 0.0), me: (1, 1.0), 50: (me, 0.0), 51: (50, 0.0), 70: (1, 5.0), 71: (70, 1.0)},
        {1: (0, 0.0), me: (1, 1.0), 50: (me, 4.0), 51: (50, 1.0), 70: (1, 6.0), 71: (70, 1.5),
         80: (1, 2.0)},
        {1: (0, 0.0), me: (1, 1.0), 50: (me, 9.0), 51: (50, 1.0), 70: (1, 7.0), 71: (70, 2.0),
         80: (1, 2.5)},
    ]
    calls = iter(snaps)
    monkeypatch.setattr(ml, "_processes", lambda: next(calls))
    meter = ml.LoadMeter(interval=3600)  # the thread never samples: only enter and exit do
    with meter:
        meter._sample()  # the middle snapshot
    # 70: 2 s, 71: 1 s, 80: 0.5 s counted from its first sample; the own tree not at all
    assert meter.result["foreign_cpu_seconds"] == pytest.approx(3.5)
    assert meter.result["cores"] == (os.cpu_count() or 1)
    assert set(meter.result) >= {"foreign_share", "loaded", "wall_seconds", "load_average"}


def test_loaded_flag(monkeypatch):
    me = os.getpid()
    snaps = iter([{me: (1, 0.0), 70: (1, 0.0)}, {me: (1, 0.0), 70: (1, 1e6)}])
    monkeypatch.setattr(ml, "_processes", lambda: next(snaps))
    with ml.LoadMeter(interval=3600) as meter:
        pass
    assert meter.result["loaded"] is True


def test_descendants_and_real_proc():
    procs = {1: (0, 0.0), 10: (1, 0.0), 11: (10, 0.0), 12: (11, 0.0), 20: (1, 0.0)}
    assert ml._descendants(10, procs) == {10, 11, 12}
    real = ml._processes()
    assert os.getpid() in real and real[os.getpid()][0] == os.getppid()


def test_wait_until_quiet(monkeypatch):
    me = os.getpid()
    monkeypatch.setattr(ml, "_processes", lambda: {me: (1, 0.0), 70: (1, 5.0)})
    quiet = ml.wait_until_quiet(max_wait_s=5, window_s=0.05, log=lambda m: None)
    assert quiet is not None and quiet["loaded"] is False

    burn = iter(range(0, 10**9, 10**6))  # another process gains CPU seconds at every sample
    monkeypatch.setattr(ml, "_processes", lambda: {me: (1, 0.0), 70: (1, float(next(burn)))})
    said = []
    busy = ml.wait_until_quiet(max_wait_s=0.2, window_s=0.05, log=said.append)
    assert busy["loaded"] is True
    assert any("timing anyway" in m for m in said)


def test_quiet_timing_keeps_both_loads(monkeypatch):
    me = os.getpid()
    monkeypatch.setattr(ml, "_processes", lambda: {me: (1, 0.0), 70: (1, 5.0)})
    monkeypatch.setattr(ml, "wait_until_quiet", lambda max_wait_s, log=print: {"loaded": False})
    with ml.quiet_timing(1, interval=3600) as loads:
        assert loads == {"machine_load_before": {"loaded": False}}  # the block's comes on exit
    assert loads["machine_load"]["foreign_cpu_seconds"] == 0.0
    assert set(loads) == {"machine_load_before", "machine_load"}
