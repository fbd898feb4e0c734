"""Transformer workloads: reproducible, in range, each fuses into one network-like task, its
candidates encode as graphs, and the ``train-transformer`` split collects and encodes."""

from __future__ import annotations

import json
import random

import pytest
import torch

from metatune.workloads_transformer import (
    MAX_ELEMENTS,
    MAX_FLOPS,
    MIN_FLOPS,
    TRANSFORMER_KINDS,
    SequenceWorkload,
    sample_sequence_workload,
    transformer_workloads,
)

#: A seed whose first workload of each kind is small (about 6 MFLOP in all): quick to measure.
SMALL_SEED = 4


def test_the_split_is_reproducible_interleaved_distinct_and_in_range():
    a = transformer_workloads(8, seed=0)
    assert [w.name for w in a] == [w.name for w in transformer_workloads(8, seed=0)]
    assert len({w.name for w in a}) == len(a) == 4 * 8
    assert [w.kind for w in a[:4]] == list(TRANSFORMER_KINDS)  # any prefix covers every kind
    assert [w.name for w in transformer_workloads(8, seed=1)] != [w.name for w in a]
    for w in a:
        if w.kind in ("batch_matmul", "seq_dense"):
            assert MIN_FLOPS <= w.flops() <= MAX_FLOPS
        else:
            assert w.input_elements() <= MAX_ELEMENTS and w.inner == w.cols
    dense = [w for w in a if w.kind == "seq_dense"]
    assert {w.epilogue for w in dense} <= {"bias", "bias_gelu"}
    assert all(w.rows >= 32 for w in dense)  # a sequence's tokens, not a classifier's batch


def test_shapes_are_attention_shapes():
    for seed in range(20):
        w = sample_sequence_workload("batch_matmul", random.Random(seed))
        # scores (S x d) x (d x S), or context (S x S) x (S x d)
        assert w.rows == w.cols or w.rows == w.inner
        assert w.input_shapes() == [(w.batch, w.rows, w.inner), (w.batch, w.inner, w.cols)]
        s = sample_sequence_workload("softmax", random.Random(seed))
        assert s.input_shapes() == [(1, s.batch, s.rows, s.rows)]


@pytest.mark.parametrize("kind", TRANSFORMER_KINDS)
def test_each_kind_fuses_into_one_task_named_as_in_a_network(kind):
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    wl = sample_sequence_workload(kind, random.Random(3))
    tasks = extract_tasks(wl.relax_module(), resolve_target("llvm").target)
    assert len(tasks) == 1
    task = tasks[0]
    assert task.arg_shapes[: len(wl.input_shapes())] == [list(s) for s in wl.input_shapes()]
    weights = list(task.extracted.dispatched[0]["main"].attrs.get("layout_free_buffers", []))
    # the names bert-tiny's and convnext-atto's tasks have (matmul, fused_matmul_add, ...)
    if kind == "batch_matmul":
        assert task.name.startswith("matmul") and not weights
    elif kind == "seq_dense":
        assert task.name.startswith("fused_matmul_add") and len(weights) == 2
        assert ("gelu" in task.name) == (wl.epilogue == "bias_gelu")
    elif kind == "softmax":
        assert task.name.startswith("softmax") and not weights
    else:  # gamma and beta, packable as a network's
        assert task.name.startswith("layer_norm") and len(weights) == 2


@pytest.mark.parametrize("kind", TRANSFORMER_KINDS)
def test_random_candidates_of_each_kind_encode_as_graphs(kind):
    """MetaSchedule's random schedules of each kind (what the collector measures) read into
    loops with roles and encode as plain and super graphs with finite features."""
    from tvm.s_tir import meta_schedule as ms

    from metatune.graph import NODE_FEATURES, encode
    from metatune.loopnest import read_loop_nest
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    target = resolve_target("llvm").target
    wl = sample_sequence_workload(kind, random.Random(SMALL_SEED))
    mod = extract_tasks(wl.relax_module(), target)[0].extracted.dispatched[0]
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                         search_strategy="replay-trace", rand_state=0, num_threads=1)
    ctx.pre_tuning(max_trials=3, num_trials_per_iter=3, design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(), cost_model=None)
    candidates = ctx.generate_measure_candidates()
    assert candidates
    for cand in candidates:
        nest = read_loop_nest(cand.sch.mod["main"])
        anchor = nest.blocks[nest.anchor]
        assert anchor.is_reduce or kind == "seq_dense"  # softmax, LayerNorm: a reduction
        assert "rc" in anchor.roles.values()  # the reduced axis is recognised
        for mode in ("plain", "super"):
            g = encode(cand.sch.mod["main"], mode)
            assert g.x.shape[1] == NODE_FEATURES and g.x.shape[0] > 1
            assert torch.isfinite(g.x).all() and g.x.abs().sum() > 0


def test_bad_workloads_are_refused():
    with pytest.raises(ValueError, match="batch_matmul"):
        sample_sequence_workload("conv2d", random.Random(0))
    with pytest.raises(ValueError, match="seq_dense takes"):
        SequenceWorkload("seq_dense", 1, 128, 128, 128)
    with pytest.raises(ValueError, match="seq_dense takes"):
        SequenceWorkload("softmax", 2, 128, 128, 128, "bias")
    with pytest.raises(ValueError, match="fewer"):
        transformer_workloads(1000)


def test_the_split_plans_one_task_per_workload():
    from tuner.app.collect_config import load_collect_config
    from tuner.app.collect_plan import plan_split
    from tuner.engine.targets import resolve_target

    cfg = load_collect_config(["splits=[train-transformer]", "transformer_per_kind=2"])
    entries = plan_split(cfg, "train-transformer", resolve_target("llvm").target)
    assert [e.kind for e in entries] == list(TRANSFORMER_KINDS) * 2
    assert all(e.split == "train-transformer" and e.samples == cfg.train_samples
               for e in entries)
    assert entries[0].info["generator"] == 1 and entries[0].info["flops"] > 0


@pytest.mark.slow
def test_the_split_collects_and_every_kind_encodes_from_its_records(tmp_path, capsys):
    """One measured record of each kind, collected as ``collect.py run`` does, replays
    and encodes as the training reads it."""
    import collect
    from metatune.dataset import load_split

    args = [f"out={tmp_path / 'data'}", f"work_dir={tmp_path / 'work'}",
            "splits=[train-transformer]", "transformer_per_kind=1", f"seed={SMALL_SEED}",
            "train_samples=2", "trials_per_round=2", "progress=false",
            "runner.min_repeat_ms=10"]
    assert collect.main(["run", *args]) == 0
    split = tmp_path / "data" / "train-transformer"
    meta = json.loads((split / "meta.json").read_text())
    assert [w["kind"] for w in meta["workloads"]] == list(TRANSFORMER_KINDS)
    for mode in ("plain", "super"):
        loaded = load_split(str(split), mode, min_samples=1)
        assert sorted(w.kind for w in loaded) == sorted(TRANSFORMER_KINDS)
        for w in loaded:
            assert all(torch.isfinite(g.x).all() and 0 < float(g.y) <= 1 for g in w.graphs)
    capsys.readouterr()
    assert collect.main(["summary", "--json", *args]) == 0
    summary = json.loads(capsys.readouterr().out)["train-transformer"]
    assert set(summary["per_kind"]) == set(TRANSFORMER_KINDS)
