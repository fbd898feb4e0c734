"""Shared fixtures. The repository root is importable (``tune``, ``bench``, ``tests.models``)
without installing: ``tests`` is a package, so pytest puts its parent on the path."""

from __future__ import annotations

import os

import pytest

# No test reads or adds to this machine's tuning memory (tune.py's runs inherit this too);
# the memory's own tests name theirs (memory.path=...).
os.environ["METATUNE_MEMORY"] = "off"


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """A tiny real dataset: two workloads (conv1d, conv1d-transpose), 6 measured samples each.

    Collected with ``collect.py`` on this machine; ``<root>/ds/train`` is the split.
    """
    import collect

    root = tmp_path_factory.mktemp("data")
    assert collect.main(["run", f"out={root / 'ds'}", f"work_dir={root / 'work'}",
                         "splits=[train]", "per_kind=1", "limit=2", "train_samples=6",
                         "trials_per_round=6", "progress=false",
                         "runner.min_repeat_ms=10"]) == 0
    return root


@pytest.fixture(scope="session")
def context_and_candidates():
    """A TuneContext of a small conv2d and 24 random postprocessed candidates of it."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from metatune.workloads import Workload
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.targets import resolve_target

    load_tensor_intrinsics(("llvm",))
    mod = tvm.IRModule({"main": Workload("conv2d", 16, 14, 32, 3, 1).prim_func()})
    ctx = ms.TuneContext(mod=mod, target=resolve_target("llvm").target,
                         space_generator="post-order-apply", search_strategy="replay-trace",
                         rand_state=0, num_threads=1)
    ctx.pre_tuning(max_trials=24, num_trials_per_iter=24,
                   design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(), cost_model=None)
    return ctx, list(ctx.generate_measure_candidates())
