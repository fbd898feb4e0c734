"""Transferred candidates store traces that re-apply to their task (issue 61).

The database stores a measured candidate's trace; MetaSchedule's evolutionary search seeds
its population by re-applying the best stored traces without their postprocessing and
postprocessing again. A transferred trace postprocessed without the ``EnterPostproc`` mark
kept ``RewriteLayout``'s ``TransformLayout`` in the re-applied part, the second layout
rewrite failed, and the sampler failed for the task in every later round.
"""

from __future__ import annotations

import pytest
import tvm
from tvm.s_tir import Schedule
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from tvm_ffi import structural_hash

from metatune.workloads import Workload
from tuner.engine.intrinsics import load_tensor_intrinsics
from tuner.engine.targets import resolve_target
from tuner.search.bo import BatchBOSearch
from tuner.search.params import BOConfig
from tuner.search.transfer import DatabaseSource, task_postprocs, transfer_candidates
from tuner.search.transfer_replay import reapplies

SOURCE = Workload("conv2d", 16, 14, 32, 3, 1)
TASK = Workload("conv2d", 16, 28, 32, 3, 1)  # the same kind, other extents: tiles refitted


def _mod(w: Workload):
    """The workload with its weight layout-free, as ``tune.py`` extracts tasks
    (``pack_weights``): ``RewriteLayout`` then adds a ``TransformLayout`` to every schedule."""
    return tvm.IRModule({"main": w.prim_func().with_attr("layout_free_buffers", [1])})


def _kinds(trace) -> list[str]:
    return [inst.kind.name for inst in trace.insts]


def _record(sch, workload, target, secs: float):
    return ms.database.TuningRecord(sch.trace, workload, [secs], target,
                                    ArgInfo.from_entry_func(sch.mod, remove_preproc=True))


@pytest.fixture(scope="module")
def target():
    load_tensor_intrinsics(("llvm",))
    return resolve_target("llvm").target


@pytest.fixture(scope="module")
def transferred(target):
    """The task's candidates transferred from 4 random schedules of the source workload."""
    mod = _mod(SOURCE)
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                         search_strategy="replay-trace", rand_state=1, num_threads=1)
    ctx.pre_tuning(max_trials=4, num_trials_per_iter=4,
                   design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(), cost_model=None)
    db = ms.database.MemoryDatabase()
    workload = db.commit_workload(mod)
    for i, cand in enumerate(ctx.generate_measure_candidates()):
        assert "TransformLayout" in _kinds(cand.sch.trace)  # the layout is rewritten
        db.commit_tuning_record(_record(cand.sch, workload, target, 1e-3 * (i + 1)))
    task = _mod(TASK)
    postprocs = task_postprocs(task, target)
    cands = transfer_candidates(task, target, [DatabaseSource(db)], k=4, postprocs=postprocs)
    assert len(cands) >= 2
    return task, postprocs, cands


def _stored(tmp_path, task, target, schedules) -> ms.database.JSONDatabase:
    """A work dir's database holding ``schedules`` as the task's records, read back from
    disk as a later round reads it."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    workload = db.commit_workload(task)
    for i, sch in enumerate(schedules):
        db.commit_tuning_record(_record(sch, workload, target, 1e-4 * (i + 1)))
    return ms.database.JSONDatabase(work_dir=str(tmp_path))


def _old_replay(cand, task, postprocs):
    """The candidate built as before the fix: postprocessed without ``EnterPostproc``."""
    sch = Schedule(task)
    cand.sch.trace.apply_to_schedule(sch, remove_postproc=True)
    assert all(p.apply(sch) for p in postprocs)
    return sch


def test_a_transferred_trace_reapplies_to_a_fresh_schedule(transferred, target, tmp_path):
    task, postprocs, cands = transferred
    for cand in cands:
        kinds = _kinds(cand.sch.trace)
        assert "EnterPostproc" in kinds
        assert kinds.index("EnterPostproc") < kinds.index("TransformLayout")
        assert reapplies(cand.sch, task, postprocs)
    # each stored record, read back from disk, rebuilds its candidate as a search would
    db = _stored(tmp_path, task, target, [c.sch for c in cands])
    rebuilt = set()
    for record in db.get_all_tuning_records():
        sch = Schedule(task)
        record.trace.apply_to_schedule(sch, remove_postproc=True)
        sch.enter_postproc()
        assert all(p.apply(sch) for p in postprocs)
        rebuilt.add(structural_hash(sch.mod))
    assert rebuilt == {structural_hash(c.sch.mod) for c in cands}


def test_an_unmarked_trace_is_what_failed(transferred):
    """The bug itself: postprocessed without the mark, some traces do not re-apply (whether
    the second layout rewrite fails depends on the tiling); ``verify`` would drop them."""
    task, postprocs, cands = transferred
    assert not all(reapplies(_old_replay(c, task, postprocs), task, postprocs) for c in cands)


def _evolutionary(task, target, db, **params):
    """A tune context whose MetaSchedule evolutionary search is ready to draw (keep the
    context: the search points into it)."""
    ctx = ms.TuneContext(
        mod=task, target=target, space_generator="post-order-apply", rand_state=0,
        num_threads=1, task_name="task",
        search_strategy=ms.search_strategy.EvolutionarySearch(
            population_size=16, genetic_num_iters=1, init_min_unmeasured=4, **params))
    ctx.search_strategy.pre_tuning(64, 8, ctx.space_generator.generate_design_space(task),
                                   db, ms.cost_model.RandomModel())
    return ctx


def test_the_sampler_seeds_from_a_database_of_transferred_records(transferred, target,
                                                                   tmp_path):
    task, postprocs, cands = transferred
    ctx = _evolutionary(task, target, _stored(tmp_path / "new", task, target,
                                              [c.sch for c in cands]),
                        init_measured_ratio=0.5)
    assert len(ctx.search_strategy.generate_measure_candidates()) > 0
    # the records stored before the fix failed the whole sampler
    old = _stored(tmp_path / "old", task, target,
                  [_old_replay(c, task, postprocs) for c in cands])
    ctx = _evolutionary(task, target, old, init_measured_ratio=0.5)
    with pytest.raises(Exception, match="initial_indices_orig"):  # noqa: B017 - TVM's error
        ctx.search_strategy.generate_measure_candidates()


def test_bo_samples_unseeded_when_a_stored_record_fails_the_sampler(transferred, target,
                                                                     tmp_path, caplog):
    task, postprocs, cands = transferred
    db = _stored(tmp_path, task, target, [_old_replay(c, task, postprocs) for c in cands])
    search = BatchBOSearch({"population_size": 16, "init_min_unmeasured": 4,
                            "init_measured_ratio": 0.5},
                           BOConfig(pool_size=8, population=16, genetic_iters=1, carry=0,
                                    mc_samples=16))
    ctx = ms.TuneContext(mod=task, target=target, space_generator="post-order-apply",
                         search_strategy=search, rand_state=0, num_threads=1,
                         task_name="task")
    ctx.pre_tuning(max_trials=8, num_trials_per_iter=4,
                   design_spaces=ctx.generate_design_space(), database=db,
                   cost_model=ms.cost_model.RandomModel())
    batch = ctx.generate_measure_candidates()
    assert batch is not None and len(batch) == 4  # no carried-over candidates: drawn anew
    assert search.unseeded is not None
    assert "samples without seeding" in caplog.text and "initial_indices_orig" in caplog.text
    ctx.post_tuning()
    assert search.unseeded is None
