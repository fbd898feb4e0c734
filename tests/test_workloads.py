"""Workload generator: reproducible, in range, every kind builds, and fusion gives one task
shaped like a network's (epilogue fused, weights layout-free)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from metatune.workloads import (
    KINDS,
    MAX_FLOPS,
    MIN_FLOPS,
    NHWC_KINDS,
    OPERATOR_KINDS,
    OTHER_KINDS,
    Workload,
    nhwc_workloads,
    sample_workload,
    training_workloads,
)


def test_training_set_is_reproducible_interleaved_and_covers_all_kinds():
    a, b = training_workloads(seed=0), training_workloads(seed=0)
    assert [w.name for w in a] == [w.name for w in b]
    assert len({w.name for w in a}) == len(a) == 7 * 14 + 3 * 4 >= 100
    assert {w.kind for w in a} == set(KINDS)
    assert [w.kind for w in a[: len(KINDS)]] == list(KINDS)  # any prefix covers every kind
    assert all(MIN_FLOPS <= w.flops() <= MAX_FLOPS for w in a if w.kind in OPERATOR_KINDS)
    assert [w.name for w in training_workloads(seed=1)] != [w.name for w in a]


def test_shapes_follow_the_papers_table_2():
    ws = training_workloads(seed=0)
    one_d = [w for w in ws if w.kind.startswith("conv1d")]
    two_d = [w for w in ws if w.kind in ("conv2d", "conv2d_transpose", "winograd")]
    assert all(150 <= w.size <= 600 and 32 <= w.c_in <= 128 and 32 <= w.c_out <= 512
               for w in one_d)
    assert all(7 <= w.size <= 224 and 3 <= w.c_in <= 128 and 16 <= w.c_out <= 128
               for w in two_d)


@pytest.mark.parametrize("kind", OPERATOR_KINDS)
def test_each_operator_kind_builds_a_prim_func(kind):
    wl = sample_workload(kind, random.Random(3))
    func = wl.prim_func()
    assert func.attrs["global_symbol"] == wl.name
    assert len(func.params) == 3  # input, weight, output
    assert wl.kernel in (1, 3, 5) and wl.stride in (1, 2)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_fuses_into_one_network_like_task(kind):
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    wl = sample_workload(kind, random.Random(3))
    tasks = extract_tasks(wl.relax_module(), resolve_target("llvm").target)
    assert len(tasks) == 1
    attrs = tasks[0].extracted.dispatched[0]["main"].attrs
    weights = list(attrs["layout_free_buffers"])
    if kind in OTHER_KINDS:
        assert not weights
    else:  # the weight (and a fused bias) may be packed, as in a network's tasks
        assert len(weights) == 1 + bool(wl.epilogue)
        if wl.epilogue == "bias_relu":
            assert tasks[0].name.endswith("relu1")


def test_nhwc_workloads_are_the_same_draws_of_the_2d_kinds_in_nhwc():
    nchw = [w for w in training_workloads(seed=0) if w.kind in NHWC_KINDS]
    nhwc = nhwc_workloads(seed=0)
    assert [replace(w, layout="NCHW") for w in nhwc] == nchw
    assert all(w.layout == "NHWC" and w.name.endswith("_nhwc") for w in nhwc)
    assert len({w.name for w in nhwc} | {w.name for w in nchw}) == 2 * len(nchw)


@pytest.mark.parametrize("kind", NHWC_KINDS)
def test_each_nhwc_kind_fuses_into_one_task_with_nhwc_data(kind):
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    wl = replace(sample_workload(kind, random.Random(3)), layout="NHWC")
    tasks = extract_tasks(wl.relax_module(), resolve_target("llvm").target)
    assert len(tasks) == 1
    shapes = tasks[0].arg_shapes
    assert shapes[0] == [1, wl.size, wl.size, wl.c_in]  # channels last
    if kind in ("conv2d", "depthwise"):  # weights OHWI, packable as in a network's tasks
        assert shapes[1][1:3] == [wl.kernel, wl.kernel]
        attrs = tasks[0].extracted.dispatched[0]["main"].attrs
        assert 1 in [int(i) for i in attrs["layout_free_buffers"]]


def test_nhwc_only_for_the_2d_kinds():
    with pytest.raises(ValueError, match="NHWC for conv2d"):
        Workload("conv1d", 32, 200, 64, 3, 1, layout="NHWC")
    with pytest.raises(ValueError, match="layout"):
        Workload("conv2d", 32, 20, 64, 3, 1, layout="NWHC")


def test_unknown_kind():
    with pytest.raises(ValueError, match="conv2d"):
        sample_workload("conv3d", random.Random(0))
    with pytest.raises(ValueError, match="relax_module"):
        sample_workload("mean", random.Random(0)).prim_func()
