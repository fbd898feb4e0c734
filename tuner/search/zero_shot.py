"""No task left with TVM's default schedule: unmeasured tasks get the cost model's pick.

A budget smaller than the network's tasks leaves some tasks unmeasured, and TVM's
default CPU schedule of a function is a naive single-threaded loop nest (resnet-18
untuned: seconds, not milliseconds). A pre-trained cost model ranks candidates of a
workload it has never measured; this is what it is for. For every task without a valid
measurement, :func:`predict_unmeasured` samples and evolves candidates of the task's
design space with MetaSchedule's evolutionary search guided by the cost model, and keeps
the one the model scores best. The picks are stored apart from the measurements, in the
work dir's ``predicted/`` database, without a run time (nothing is claimed measured), and
:func:`with_predictions` lets the final compile use a pick only where the measured
database has no schedule.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from metatune.errors import ConfigError
from tuner.engine.database import valid_and_measured_per_task

logger = logging.getLogger(__name__)

#: Sub-directory of the work dir holding the predicted (unmeasured) schedules.
PREDICTED_DIR = "predicted"


@dataclass
class PredictConfig:
    """How the cost model's pick is searched for.

    Attributes:
        enabled: Predict a schedule for unmeasured tasks (else they keep TVM's default).
        population: Evolutionary population of the sampler.
        genetic_iters: Its evolution rounds (each scored by the cost model).
        candidates: Candidates the search returns, among which the best-scored is kept.
    """

    enabled: bool = True
    population: int = 256
    genetic_iters: int = 3
    candidates: int = 32

    def __post_init__(self) -> None:
        """Check the sizes: a ``PredictConfig`` that exists is valid.

        Raises:
            ConfigError: A size out of range.
        """
        if min(self.population, self.candidates) <= 0 or self.genetic_iters < 0:
            raise ConfigError("predict_unmeasured: population and candidates must be "
                              "positive, genetic_iters not negative")


def open_predictions(work_dir: str):
    """The JSON database of predicted schedules under ``<work_dir>/predicted``."""
    from tvm.s_tir import meta_schedule as ms

    from tuner.engine.bf16_dot import register

    register()  # a bf16 run's picks name its intrinsic (tuner.engine.precision)
    path = os.path.join(work_dir, PREDICTED_DIR)
    os.makedirs(path, exist_ok=True)
    return ms.database.JSONDatabase(work_dir=path, module_equality="structural")


def predict_best(mod, target, cost_model, cfg: PredictConfig, *, seed: int,
                 num_threads: int, task_name: str = "main"):
    """The candidate of ``mod``'s design space that ``cost_model`` scores best.

    Args:
        mod: The task's ``IRModule``.
        target: The ``tvm.target.Target``.
        cost_model: A MetaSchedule cost model (scores: higher is faster).
        cfg: The search settings.
        seed: Random seed of the sampler.
        num_threads: Threads of the search.
        task_name: For MetaSchedule's logs.

    Returns:
        The postprocessed schedule (``tvm.s_tir.Schedule``), or ``None`` when the space
        yields no valid candidate.
    """
    from tvm.s_tir import meta_schedule as ms

    search = ms.search_strategy.EvolutionarySearch(
        population_size=int(cfg.population), genetic_num_iters=int(cfg.genetic_iters),
        init_min_unmeasured=int(cfg.population), eps_greedy=0.0)
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                         search_strategy=search, task_name=task_name, rand_state=seed,
                         num_threads=num_threads)
    ctx.pre_tuning(max_trials=int(cfg.candidates), num_trials_per_iter=int(cfg.candidates),
                   design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(), cost_model=cost_model)
    try:
        candidates = list(ctx.generate_measure_candidates() or [])
    finally:
        ctx.post_tuning()
    if not candidates:
        return None
    scores = np.asarray(cost_model.predict(ctx, candidates), dtype=float)
    return candidates[int(np.argmax(scores))].sch


def predict_unmeasured(tasks, database, work_dir: str, target, cost_model_factory,
                       cfg: PredictConfig, *, seed: int, num_threads: int) -> list[str]:
    """Store the cost model's pick for every task without a valid measurement.

    Tasks that already have a pick keep it. The cost model is built only if a pick is
    needed.

    Args:
        tasks: The :class:`tuner.engine.tasks.TaskInfo` list.
        database: The measured database.
        work_dir: The work dir (picks go to ``<work_dir>/predicted``).
        target: The ``tvm.target.Target``.
        cost_model_factory: ``() -> cost model``; called at most once.
        cfg: The search settings.
        seed: Random seed.
        num_threads: Threads of the search.

    Returns:
        The names of the tasks given a predicted schedule by this call.
    """
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm_ffi import structural_hash

    mods = [t.extracted.dispatched[0] for t in tasks]
    counts = valid_and_measured_per_task(database, mods)
    todo = [i for i, (valid, _) in enumerate(counts) if valid == 0]
    if not todo:
        return []
    predictions = open_predictions(work_dir)
    have = _workload_hashes(predictions)
    todo = [i for i in todo if structural_hash(mods[i]) not in have]
    if not todo:
        return []
    cost_model = cost_model_factory()
    done = []
    for i in todo:
        task = tasks[i]
        sch = predict_best(mods[i], target, cost_model, cfg, seed=seed,
                           num_threads=num_threads, task_name=task.name)
        if sch is None:
            logger.warning("%s: no valid candidate to predict; it keeps TVM's default schedule",
                           task.name)
            continue
        workload = predictions.commit_workload(mods[i])
        predictions.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, workload, None, target, ArgInfo.from_prim_func(_main(mods[i]))))
        done.append(task.name)
    if done:
        logger.info("%d unmeasured task(s) use the cost model's best-predicted schedule: %s",
                    len(done), ", ".join(done))
    return done


def _main(mod):
    """The single PrimFunc of a task module."""
    return next(iter(mod.functions.values()))


def _workload_hashes(database) -> set[int]:
    """The structural hashes of the workloads ``database`` holds a record of."""
    from tvm_ffi import structural_hash

    return {structural_hash(r.workload.mod) for r in database.get_all_tuning_records()}


def with_predictions(database, work_dir: str):
    """The measured database, backed by the predicted schedules where it has none.

    Args:
        database: The measured MetaSchedule database.
        work_dir: The work dir holding ``predicted/``.

    Returns:
        ``database`` itself when there are no predictions, else an
        ``OrderedUnionDatabase`` that asks ``database`` first.
    """
    from tvm.s_tir import meta_schedule as ms
    from tvm_ffi import structural_hash

    if not os.path.isdir(os.path.join(work_dir, PREDICTED_DIR)):
        return database
    # Keyed by the PrimFunc: the schedule-function database adds module attributes.
    table = {structural_hash(_main(r.workload.mod)): r.trace
             for r in open_predictions(work_dir).get_all_tuning_records()}
    if not table:
        return database

    def apply(sch) -> bool:
        trace = table.get(structural_hash(_main(sch.mod)))
        if trace is None:
            return False
        trace.apply_to_schedule(sch, remove_postproc=False)
        return True

    return ms.database.OrderedUnionDatabase(database, ms.database.ScheduleFnDatabase(apply))


def schedule_sources(tasks, database, work_dir: str) -> list[str]:
    """Where each task's schedule in the compiled network comes from.

    Returns:
        One of ``"measured"``, ``"predicted"`` or ``"default"`` per task.
    """
    from tvm_ffi import structural_hash


    mods = [t.extracted.dispatched[0] for t in tasks]
    predicted: set = set()
    if os.path.isdir(os.path.join(work_dir, PREDICTED_DIR)):
        predicted = _workload_hashes(open_predictions(work_dir))
    out = []
    for mod, (valid, _) in zip(mods, valid_and_measured_per_task(database, mods), strict=False):
        if valid:
            out.append("measured")
        elif structural_hash(mod) in predicted:
            out.append("predicted")
        else:
            out.append("default")
    return out
