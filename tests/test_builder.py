"""The persistent builder builds real modules and keeps its workers across rounds."""

from __future__ import annotations

import os

import tvm
from tvm.s_tir import meta_schedule as ms

from tuner.engine.builder import PersistentBuilder
from tuner.engine.targets import resolve_target


def _add_one_module() -> tvm.IRModule:
    from tvm import te

    a = te.placeholder((64,), "float32", "a")
    b = te.compute((64,), lambda i: a[i] + 1.0, name="b")
    return tvm.IRModule({"main": te.create_prim_func([a, b])})


def _worker_pids(builder: PersistentBuilder) -> set[int]:
    """Process ids of the pool's live workers (read from the pool, not sampled with jobs)."""
    workers = builder._get_pool()._worker_map.values()
    return {w._proc.pid for w in workers if w._proc is not None and w.is_alive()}


def test_builds_and_reuses_workers():
    target = resolve_target("llvm").target
    builder = PersistentBuilder(max_workers=2, timeout_sec=60)
    try:
        mod = _add_one_module()
        inputs = [ms.builder.BuilderInput(mod, target) for _ in range(3)]
        first = builder.build(inputs)
        assert all(r.error_msg is None and os.path.exists(r.artifact_path) for r in first)
        pids = _worker_pids(builder)
        second = builder.build(inputs)
        assert all(r.error_msg is None for r in second)
        after = _worker_pids(builder)
        assert pids and pids <= after  # no worker replaced: start-up paid once
        assert len(after) <= 2
    finally:
        builder.shutdown()


def test_build_errors_are_results_not_crashes():
    builder = PersistentBuilder(max_workers=1, timeout_sec=60)
    try:
        bad = ms.builder.BuilderInput(_add_one_module(),
                                      tvm.target.Target({"kind": "llvm", "mtriple": "nonsense"}))
        (result,) = builder.build([bad])
        assert result.artifact_path is None and result.error_msg
    finally:
        builder.shutdown()
