"""A measured schedule is recognized after the database's JSON round trip (packed weights)."""

from __future__ import annotations

from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from tvm_ffi import structural_hash

from tuner.engine.networks import load_network
from tuner.engine.norepeat import measured_schedules
from tuner.engine.targets import resolve_target
from tuner.engine.tasks import extract_tasks


def test_stored_candidates_hash_as_proposed(tmp_path):
    info = resolve_target("llvm")
    net = load_network(model_spec="tests.models:tiny_convnet", input_shape=(8, 16, 16))
    mod = extract_tasks(net.relax_mod, info.target)[0].extracted.dispatched[0]  # layout-free
    ctx = ms.TuneContext(mod=mod, target=info.target, space_generator="post-order-apply",
                         search_strategy="replay-trace", rand_state=0, num_threads=1)
    ctx.pre_tuning(max_trials=8, num_trials_per_iter=8,
                   design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(), cost_model=None)
    candidates = list(ctx.generate_measure_candidates())
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    workload = db.commit_workload(mod)
    func = next(iter(mod.functions.values()))
    for c in candidates:
        db.commit_tuning_record(ms.database.TuningRecord(
            c.sch.trace, workload, [1e-3], info.target, ArgInfo.from_prim_func(func)))
    reopened = ms.database.JSONDatabase(work_dir=str(tmp_path))  # through JSON
    known = {h for h, _, _ in measured_schedules(reopened, mod,
                                                 list(ctx.space_generator.postprocs))}
    assert {structural_hash(c.sch.mod) for c in candidates} <= known
