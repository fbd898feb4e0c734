"""Loop-nest graph encoder on small hand-written PrimFuncs with known loops."""

from __future__ import annotations

import json
import math
import os
import random

import pytest
import torch
from tvm import s_tir, te

from metatune.graph import CONTROL, METADATA, NESTING, NODE_FEATURES, SLOTS, encode
from metatune.loopnest import LOOP_FEATURES, read_loop_nest
from metatune.workloads import KINDS, OPERATOR_KINDS, Workload, sample_workload

F = {name: i for i, name in enumerate(LOOP_FEATURES)}


def _matmul(m=8, n=16, k=32):
    a = te.placeholder((m, k), "float32", "A")
    b = te.placeholder((n, k), "float32", "B")
    r = te.reduce_axis((0, k), "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[j, r], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def test_unscheduled_matmul_nodes_edges_and_features():
    nest = read_loop_nest(_matmul())
    assert [(loop.var, loop.extent) for loop in nest.loops] == [("i", 8), ("j", 16), ("k", 32)]
    assert [loop.role for loop in nest.loops] == ["y", "f", "rc"]
    assert all(loop.stage == "main" and loop.level == 0 for loop in nest.loops)
    k = nest.loops[2].features
    j = nest.loops[1].features
    assert j[F["buf0_log_stride"]] == pytest.approx(1.0)  # C[i, j]: stride 1 -> log2(2)
    assert k[F["log_extent"]] == pytest.approx(math.log2(33))
    assert k[F["serial"]] == 1.0 and k[F["innermost"]] == 1.0
    # buffers: C (write), then the larger read; k does not move C: reuse
    assert k[F["buf0_reuse"]] == 1.0 and k[F["buf1_reuse"]] == 0.0
    assert k[F["buf1_log_stride"]] == pytest.approx(math.log2(2))  # B[j, k]: stride 1
    # bytes touched by loop i (with the loops inside): all of B (larger read), all of A
    i = nest.loops[0].features
    assert i[F["buf1_log_bytes"]] == pytest.approx(math.log2(1 + 16 * 32 * 4))
    assert i[F["buf2_log_bytes"]] == pytest.approx(math.log2(1 + 8 * 32 * 4))
    # one row of A per iteration of i: loop j touches 32 floats of A
    assert j[F["buf2_log_bytes"]] == pytest.approx(math.log2(1 + 32 * 4))

    g = encode(_matmul(), "plain")
    assert g.x.shape == (1 + 2 * 3, NODE_FEATURES)
    edges = {(int(s), int(d), int(t)) for s, d, t in zip(*g.edge_index, g.edge_type, strict=False)}
    assert edges == {(0, 1, CONTROL), (0, 2, CONTROL), (0, 3, CONTROL),
                     (1, 4, METADATA), (2, 5, METADATA), (3, 6, METADATA),
                     (1, 2, NESTING), (2, 3, NESTING)}


def test_scheduled_loops_get_kind_level_and_stride():
    sch = s_tir.Schedule(_matmul())
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, factors=[4, 4])
    sch.parallel(i)
    sch.vectorize(j1)
    nest = read_loop_nest(sch.mod["main"])
    by_var = {loop.var: loop for loop in nest.loops}
    assert by_var["i"].features[F["parallel"]] == 1.0
    assert by_var["j_1"].features[F["vectorized"]] == 1.0
    assert (by_var["j_0"].level, by_var["j_1"].level) == (0, 1)
    assert by_var["j_0"].role == by_var["j_1"].role == "f"
    # j_0 steps 4 columns of C, j_1 one
    assert by_var["j_0"].features[F["buf0_log_stride"]] == pytest.approx(math.log2(5))
    assert by_var["j_1"].features[F["buf0_log_stride"]] == pytest.approx(1.0)


@pytest.mark.parametrize("kind", OPERATOR_KINDS)
def test_super_graph_slots_mean_the_same_across_types(kind):
    wl = sample_workload(kind, random.Random(1))
    g = encode(wl.prim_func(), "super")
    assert g.x.shape == (1 + 2 * len(SLOTS), NODE_FEATURES)
    present = {SLOTS[i] for i in range(len(SLOTS)) if g.x[1 + i, 3] == 1.0}
    # every type fills the main-stage output-channel and innermost-spatial slots
    assert ("main", "f", 0) in present
    assert ("main", "x" if kind != "dense" else "y", 0) in present
    if kind in ("conv2d", "conv2d_transpose", "conv1d", "conv1d_transpose", "dense"):
        assert ("main", "rc", 0) in present
    # iterval slot k mirrors for slot k
    assert torch.equal(g.x[1:1 + len(SLOTS), 3], g.x[1 + len(SLOTS):, 3])


def test_same_roles_for_conv2d_and_depthwise_axes():
    conv = read_loop_nest(Workload("conv2d", 16, 14, 32, 3, 1).prim_func())
    dw = read_loop_nest(Workload("depthwise", 16, 14, 16, 3, 1).prim_func())
    main = lambda nest: [loop.role for loop in nest.loops if loop.stage == "main"]  # noqa: E731
    assert main(conv) == ["n", "f", "y", "x", "rc", "ry", "rx"]
    assert main(dw) == ["n", "f", "y", "x", "ry", "rx"]


@pytest.mark.parametrize("mode", ["plain", "super"])
def test_encoding_is_deterministic(mode):
    func = Workload("conv2d", 32, 28, 64, 3, 2).prim_func()
    a, b = encode(func, mode), encode(func, mode)
    assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)


def test_unknown_mode():
    with pytest.raises(ValueError, match="plain, super"):
        encode(_matmul(), "fancy")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["plain", "super"])
def test_every_training_kind_encodes_as_the_tuner_sees_it(kind, mode):
    """The fused task of every workload kind (epilogues, pooling, mean) encodes."""
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    wl = sample_workload(kind, random.Random(2))
    task = extract_tasks(wl.relax_module(), resolve_target("llvm").target)[0]
    g = encode(task.extracted.dispatched[0]["main"], mode)
    assert g.x.shape[1] == NODE_FEATURES and g.x.shape[0] > 1
    assert torch.isfinite(g.x).all()


GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "graph_golden.json")


def golden_cases() -> dict:
    """Functions whose graphs are pinned: every training kind's fused task as the tuner
    extracts it, and random postprocessed candidates of a dense task (MetaSchedule's
    design space, fixed seed)."""
    from tvm.s_tir import meta_schedule as ms

    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    target = resolve_target("llvm").target
    cases = {}
    for kind in KINDS:
        task = extract_tasks(sample_workload(kind, random.Random(2)).relax_module(), target)[0]
        cases[f"{kind}-task"] = task.extracted.dispatched[0]["main"]
    dense = extract_tasks(sample_workload("dense", random.Random(2)).relax_module(), target)[0]
    ctx = ms.TuneContext(mod=dense.extracted.dispatched[0], target=target,
                         space_generator="post-order-apply", search_strategy="replay-trace",
                         rand_state=0, num_threads=1)
    ctx.pre_tuning(max_trials=6, num_trials_per_iter=6, design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(), cost_model=None)
    for i, cand in enumerate(ctx.generate_measure_candidates()):
        cases[f"dense-candidate-{i}"] = cand.sch.mod["main"]
    return cases


def graph_stats(g) -> dict:
    """What pins a graph: its shape, its edges exactly, and three sums of its features
    (plain, squared, weighted by row and column, so that a moved value shows)."""
    import hashlib

    import numpy as np

    x = g.x.double().numpy()
    weights = np.outer(np.arange(1, x.shape[0] + 1), np.arange(1, x.shape[1] + 1))
    edges = np.concatenate([g.edge_index.numpy().ravel(), g.edge_type.numpy()])
    return {"shape": list(x.shape), "edges": hashlib.sha256(edges.astype("<i8").tobytes())
            .hexdigest()[:16], "sum": float(x.sum()), "sum_sq": float((x * x).sum()),
            "weighted": float((x * weights).sum())}


def test_graphs_are_those_the_checkpoints_were_trained_on():
    """The encoder's output is pinned (``graph_golden.json``, made by the encoder of
    ``FEATURE_VERSION`` 1): a change to the graphs must come with a new feature version,
    so that the checkpoints trained on the old ones are refused, not misread."""
    from metatune.graph import FEATURE_VERSION

    with open(GOLDEN, encoding="utf-8") as f:
        golden = json.load(f)
    assert golden["feature_version"] == FEATURE_VERSION, (
        "FEATURE_VERSION changed: regenerate tests/graph_golden.json with the new encoder")
    cases = golden_cases()
    assert set(cases) == set(golden["graphs"])
    for name, func in cases.items():
        for mode in ("plain", "super"):
            got, want = graph_stats(encode(func, mode)), golden["graphs"][name][mode]
            assert got["shape"] == want["shape"] and got["edges"] == want["edges"], (name, mode)
            for key in ("sum", "sum_sq", "weighted"):
                assert got[key] == pytest.approx(want[key], rel=1e-6), (
                    f"{name} ({mode}): the graph features changed; if on purpose, bump "
                    "metatune.graph.FEATURE_VERSION and regenerate tests/graph_golden.json")
