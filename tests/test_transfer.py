"""Schedule transfer: similarity, replay onto another workload, sources read and skipped."""

from __future__ import annotations

import gzip
import logging
import math
import os
import shutil

import pytest
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from tvm_ffi import structural_hash

from metatune.workloads import Workload
from tuner.engine.intrinsics import load_tensor_intrinsics
from tuner.engine.targets import resolve_target
from tuner.search import transfer_sources
from tuner.search.transfer import (
    DatabaseSource,
    DatasetSource,
    Transferred,
    dataset_sources,
    nearest_workloads,
    task_postprocs,
    transfer_candidates,
)
from tuner.search.transfer_replay import ReplayStats, refit_tiles, replay_onto
from tuner.search.transfer_similarity import distance, signature
from tuner.search.transfer_sources import _scan_line

CONV = Workload("conv2d", 16, 14, 32, 3, 1)        # the stored workload
CONV_BIG = Workload("conv2d", 16, 28, 32, 3, 1)    # the same kind, twice the image
CONV_FAR = Workload("conv2d", 64, 56, 128, 3, 1)   # the same kind, far
DENSE = Workload("dense", 64, 4, 32)               # another kind


def _mod(w: Workload):
    return tvm.IRModule({"main": w.prim_func()})


def _random_schedules(mod, target, n: int) -> list:
    """``n`` random postprocessed schedules of ``mod`` (MetaSchedule's ``ReplayTrace``)."""
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                         search_strategy="replay-trace", rand_state=1, num_threads=1)
    ctx.pre_tuning(max_trials=n, num_trials_per_iter=n,
                   design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(), cost_model=None)
    return [c.sch for c in ctx.generate_measure_candidates()]


@pytest.fixture(scope="module")
def target():
    load_tensor_intrinsics(("llvm",))
    return resolve_target("llvm").target


@pytest.fixture(scope="module")
def stored(target):
    """A database of CONV, CONV_FAR and DENSE, 6 random schedules each; record ``i`` of a
    workload ran ``i + 1`` ms."""
    db = ms.database.MemoryDatabase()
    for w in (CONV, CONV_FAR, DENSE):
        mod = _mod(w)
        workload = db.commit_workload(mod)
        for i, sch in enumerate(_random_schedules(mod, target, 6)):
            db.commit_tuning_record(ms.database.TuningRecord(
                sch.trace, workload, [1e-3 * (i + 1)], target,
                ArgInfo.from_prim_func(mod["main"])))
    return db


def test_signature_and_distance():
    a, b, far, dense = (signature(_mod(w)) for w in (CONV, CONV_BIG, CONV_FAR, DENSE))
    assert a.kind == b.kind == far.kind != dense.kind
    assert [name for name, _ in a.kind] == ["pad_temp", "conv2d_nchw"]
    assert distance(a, a) == 0.0
    assert 0 < distance(a, b) < distance(a, far)
    assert distance(a, dense) == math.inf


def test_nearest_is_same_kind_and_nearest_shape(stored):
    near = nearest_workloads(_mod(CONV_BIG), [DatabaseSource(stored)], n=4)
    assert len(near) == 2  # the two convolutions; never the dense
    assert near[0][0] < near[1][0]
    assert near[0][1].signature == signature(_mod(CONV))
    exact = nearest_workloads(_mod(CONV), [DatabaseSource(stored)], n=1)
    assert exact[0][0] == 0.0 and exact[0][1].shash == str(structural_hash(_mod(CONV)))


def test_refit_tiles():
    assert refit_tiles([1, 7, 8, 1], 56) == [1, 7, 8, 1]  # still fits: kept
    assert refit_tiles([1, 7, 8, 1], 28) == [1, 4, 7, 1]  # the nearest divisors, inner first
    assert refit_tiles([2, 2, 16], 56, max_innermost=8) == [7, 1, 8]
    for factors, extent in (([4, 4, 4, 4], 13), ([1, 1, 64], 30), ([3, 3], 1)):
        assert math.prod(refit_tiles(factors, extent)) == extent


def test_same_shape_replay_applies(stored, target):
    source = DatabaseSource(stored).workloads(signature(_mod(CONV)).kind)
    conv = next(w for w in source if w.signature == signature(_mod(CONV)))
    stats = ReplayStats()
    postprocs = task_postprocs(_mod(CONV), target)
    for i in range(len(conv.seconds)):
        assert replay_onto(conv.traces(i), _mod(CONV), postprocs, stats) is not None
    assert stats.applied == stats.tried == 6 and stats.refitted == 0


def test_other_shape_replay_applies_or_drops_cleanly(stored, target):
    out = Transferred()
    cands = transfer_candidates(_mod(CONV_BIG), target, [DatabaseSource(stored)], k=5,
                                per_workload=3, out=out)
    assert out.replay.tried >= len(cands) > 0
    assert out.replay.applied + out.replay.failed + out.replay.rejected == out.replay.tried
    assert len(cands) <= 5 and len({structural_hash(c.sch.mod) for c in cands}) == len(cands)
    assert out.origins[0][1] == out.nearest[0][1]  # the nearest workload's first
    assert [rank for _, _, rank in out.origins[:2]] == [0, 1]  # its best first
    assert out.replay.refitted > 0  # tiles of 14 do not all divide 28
    # the schedule is the big conv's: it builds
    tvm.compile(cands[0].sch.mod, target=target)
    plain = Transferred()  # TVM's own fallback for the tiles instead
    assert transfer_candidates(_mod(CONV_BIG), target, [DatabaseSource(stored)], k=2,
                               refit=False, out=plain)
    assert plain.replay.refitted == 0
    # a trace of another kind fails on a block it names and is dropped, not raised
    dense = DatabaseSource(stored).workloads(signature(_mod(DENSE)).kind)[0]
    stats = ReplayStats()
    assert replay_onto(dense.traces(0), _mod(CONV_BIG), [], stats) is None
    assert stats.failed == 1


def test_dataset_split_read(stored, tmp_path, target):
    """A split on disk (gzipped, as shipped) reads back the best records, lazily parsed."""
    (tmp_path / "w").mkdir()
    db = ms.database.JSONDatabase(work_dir=str(tmp_path / "w"))
    for record in stored.get_all_tuning_records():
        db.commit_tuning_record(ms.database.TuningRecord(
            record.trace, db.commit_workload(record.workload.mod), record.run_secs,
            record.target, record.args_info))
    split = tmp_path / "data" / "llvm-test" / "train"
    split.mkdir(parents=True)
    for name in ("database_workload.json", "database_tuning_record.json"):
        with open(tmp_path / "w" / name, "rb") as f, gzip.open(split / f"{name}.gz", "wb") as g:
            shutil.copyfileobj(f, g)
    cache = tmp_path / "cache"
    for fresh_process in (False, True):  # read the split, then its index in the cache
        if fresh_process:
            transfer_sources._SPLITS.clear()
            assert len(os.listdir(cache)) == 1
        source = DatasetSource(str(split), per_workload=4, cache_dir=str(cache))
        kinds = source.by_kind()
        assert len(kinds) == 2 and sum(len(v) for v in kinds.values()) == 3
        conv = next(w for w in kinds[signature(_mod(CONV)).kind]
                    if w.signature == signature(_mod(CONV)))
        assert conv.seconds == pytest.approx([1e-3, 2e-3, 3e-3, 4e-3])
        cands = transfer_candidates(_mod(CONV), target, [source], k=2)
        assert len(cands) == 2


def test_scan_line_agrees_with_json():
    import json

    path = os.path.join("data", "llvm-znver4", "train-nhwc", "database_tuning_record.json.gz")
    if not os.path.exists(path):
        pytest.skip("no shipped dataset here")
    with gzip.open(path, "rb") as f:
        for _, line in zip(range(40), f, strict=False):
            index, raw = json.loads(line)
            assert _scan_line(line) == (index, raw[1])
    assert _scan_line(b"not a record\n") is None


def test_missing_or_corrupt_dataset_skipped_with_one_warning(tmp_path, caplog, target):
    bad = tmp_path / "llvm-bad" / "train"
    bad.mkdir(parents=True)
    (bad / "database_workload.json.gz").write_bytes(b"not gzip at all")
    (bad / "database_tuning_record.json.gz").write_bytes(b"\x1f\x8b garbage")
    missing = tmp_path / "llvm-gone" / "train"
    with caplog.at_level(logging.WARNING, logger="tuner.search.transfer_sources"):
        for split in (bad, missing):
            for _ in range(2):  # asked again: no second warning
                assert DatasetSource(str(split)).by_kind() == {}
                assert transfer_candidates(_mod(CONV), target, [DatasetSource(str(split))]) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert any(str(bad) in w for w in warnings) and any(str(missing) in w for w in warnings)


def test_dataset_sources_prefer_own_platform_and_layout(tmp_path, target):
    def split(platform, name, layout=None):
        d = tmp_path / platform / name
        d.mkdir(parents=True)
        (d / "database_tuning_record.json.gz").write_bytes(b"")
        settings = {"layout": layout} if layout else {}
        (d / "meta.json").write_text(
            '{"target": "{\\"kind\\": \\"llvm\\"}", "settings": %s, "workloads": []}'
            % __import__("json").dumps(settings))

    split("llvm-generic", "train")
    split("llvm-generic", "train-nhwc", "NHWC")
    split("llvm-other", "heldout")
    tgt = tvm.target.Target({"kind": "llvm"})  # platform llvm-generic
    names = [os.path.relpath(s.split_dir, tmp_path)
             for s in dataset_sources(tgt, "NHWC", data_root=str(tmp_path))]
    assert names == [os.path.join("llvm-generic", "train-nhwc")]
    names = [os.path.relpath(s.split_dir, tmp_path)
             for s in dataset_sources(tvm.target.Target({"kind": "llvm", "mcpu": "znver9"}),
                                      "NCHW", data_root=str(tmp_path))]
    assert names == [os.path.join("llvm-generic", "train"), os.path.join("llvm-other", "heldout")]
