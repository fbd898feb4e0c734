"""Tune a list of tasks with MetaSchedule's task scheduler, resumably (:func:`tune`).

The session it tunes with is built in :mod:`tuner.app.session` from the factories of
:mod:`tuner.app.factories`."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from tuner.app.config import TuneConfig
from tuner.app.monitor import FailureMonitor, MonitorCallback, ProgressMonitor
from tuner.app.rounds import BatchAccuracyCallback, RoundMonitor
from tuner.app.session import build_cost_model, build_session
from tuner.engine.database import best_seconds_per_task, measured_per_task
from tuner.engine.durability import RecordFileGuard, as_write_error
from tuner.engine.interrupt import InterruptWatch
from tuner.engine.scheduler import EagerGradientScheduler, RoundBudget
from tuner.engine.tasks import TaskInfo
from tuner.search.zero_shot import predict_unmeasured

logger = logging.getLogger(__name__)


@dataclass
class TuningOutcome:
    """What one tuning run did.

    Attributes:
        trials_before: Measurements already in the database for these tasks.
        trials_run: Measurements made by this run.
        tuning_seconds: Wall time of this run's tuning loop.
        failures: Measurements of this run that failed (build or run).
        best_ms: Best run time per task after tuning (``None`` if none valid).
        errors: The most common failure messages with their counts.
        trials_per_task: Measurements in the database per task after this run, those
            of a resumed run's earlier sessions included (a task whose search space runs
            out of new candidates gets fewer than its share).
    """

    trials_before: int
    trials_run: int
    tuning_seconds: float
    failures: int
    best_ms: list[float | None]
    errors: list[tuple[str, int]] = field(default_factory=list)
    rounds: dict = field(default_factory=dict)
    predicted: list[str] = field(default_factory=list)
    predict_seconds: float = 0.0
    trials_per_task: list[int] = field(default_factory=list)
    memory: dict | None = None


def tune(tasks: list[TaskInfo], *, target_info, database, cfg: TuneConfig, work_dir: str,
         writer=None, memory=None) -> TuningOutcome:
    """Tune ``tasks`` until the database holds ``cfg.trials`` measurements of them.

    Measurements already in the database count toward the budget, so a second run with
    the same work dir continues where the first stopped and re-measures nothing; with
    ``cfg.trials_per_task`` (or ``rounds_per_task``), each task's own measurements count
    toward its share, so that a rerun tops up only the tasks short of it.

    Args:
        tasks: The tasks to tune.
        target_info: A :class:`tuner.engine.targets.TargetInfo`.
        database: The MetaSchedule database (records are appended to it).
        cfg: The tune configuration.
        work_dir: The work directory.
        writer: TensorBoard ``SummaryWriter`` or ``None``.
        memory: The run's :class:`tuner.app.memory_run.RunMemory` (``None``: no memory):
            its known and claimed tasks get no round, the budget is their share of
            ``cfg.trials``, records copied from it do not count, every round's records go
            to it, and before the end the tasks other runs claimed are waited for.

    Returns:
        A :class:`TuningOutcome`.

    Raises:
        TuningStalledError: Several rounds in a row measured nothing valid.
        WorkDirError: A round's records did not reach the disk (full or unwritable).
    """
    from tvm.s_tir import meta_schedule as ms

    mods = [t.extracted.dispatched[0] for t in tasks]
    before = measured_per_task(database, mods)
    if memory is not None:  # records copied from the memory are not this work dir's own
        before = memory.own_counts(before)
    trials_before = sum(before)
    trials = cfg.trials if memory is None else memory.budget(cfg.trials)
    remaining = trials - trials_before
    per_task = cfg.trials_per_task
    task_left = None if per_task is None else [max(0, per_task - b) for b in before]
    skip = set() if memory is None else memory.skip
    if skip:  # known to the memory, or tuned by another run: no round here
        task_left = [0 if i in skip else (remaining if task_left is None else task_left[i])
                     for i in range(len(tasks))]
    if task_left is not None:  # a resumed run tops each task up to its share
        remaining = min(remaining, sum(task_left))
    best = best_seconds_per_task(database, mods)
    if remaining <= 0:
        if len(skip) < len(tasks):
            logger.info("database already holds %d measurements (budget %d%s): nothing to "
                        "tune", trials_before, trials,
                        "" if per_task is None else f", {per_task} a task")
        outcome = TuningOutcome(trials_before, 0, 0.0, 0,
                                [None if b is None else b * 1e3 for b in best],
                                trials_per_task=list(before))
        _settle_into(outcome, memory, database, mods)
        _predict_into(outcome, tasks, target_info, database, cfg, work_dir,
                      lambda: build_cost_model(cfg, target_info))
        return outcome
    if trials_before:
        logger.info("resuming: %d measurements in the database, %d to go",
                    trials_before, remaining)

    budget = RoundBudget(remaining)
    session = build_session(cfg, target_info, budget=budget)
    if memory is not None:  # new tasks start from similar tasks' schedules
        session.search = memory.with_transfer(session.search, target_info.target, cfg.layout)
    contexts = session.contexts(tasks, work_dir)
    names = [t.name for t in tasks]
    failures = FailureMonitor(max_failed_rounds=cfg.max_failed_rounds, task_names=names)
    progress = ProgressMonitor(
        task_names=names, task_weights=[t.weight for t in tasks], best_seconds=best,
        budget=remaining, work_dir=work_dir, trials_before=trials_before, writer=writer,
        show_bar=cfg.progress)
    rounds = RoundMonitor(session.clock, names, work_dir, writer, trials_before)
    guard = RecordFileGuard(work_dir)  # first: a round not on disk is never counted
    interrupt = InterruptWatch()
    # Order matters: the batch is scored before the cost model learns from it
    # (UpdateCostModel is among the defaults), and the round closes after the update.
    callbacks = [BatchAccuracyCallback(session.clock, session.cost_model, progress.best),
                 *ms.measure_callback.MeasureCallback.create("default"),
                 MonitorCallback([guard, *([memory.writer] if memory else []), interrupt,
                                  failures, progress, rounds])]
    start = time.perf_counter()
    interrupt.__enter__()
    try:
        EagerGradientScheduler(budget=budget, trials_per_round=cfg.trials_per_round,
                               task_left=task_left, first_round=cfg.first_round_trials,
                               known=list(zip(before, best, strict=True))).tune(
            tasks=contexts,
            task_weights=[float(t.weight) for t in tasks],
            max_trials_global=remaining,
            max_trials_per_task=per_task or remaining,
            num_trials_per_iter=cfg.trials_per_round,
            builder=session.builder,
            runner=session.runner,
            measure_callbacks=callbacks,
            database=database,
            cost_model=session.cost_model,
        )
    except Exception as err:
        if interrupt.seen:  # Ctrl-C crossed TVM's FFI as another error
            raise KeyboardInterrupt from None
        if guard.error is not None:
            raise guard.error from err
        if failures.stalled is not None:
            raise failures.stalled from err
        write_error = as_write_error(err, work_dir)
        if write_error is not None:
            raise write_error from err
        raise
    finally:
        interrupt.__exit__()
        progress.close()
        session.close()
    if interrupt.seen:
        raise KeyboardInterrupt
    seconds = time.perf_counter() - start
    outcome = TuningOutcome(
        trials_before=trials_before,
        trials_run=progress.done,
        tuning_seconds=seconds,
        failures=failures.failures,
        best_ms=[None if b is None else b * 1e3 for b in progress.best],
        errors=failures.errors.most_common(5),
        rounds=rounds.summary(),
        trials_per_task=[b + n for b, n in zip(before, progress.per_task, strict=False)],
    )
    _settle_into(outcome, memory, database, mods)
    _predict_into(outcome, tasks, target_info, database, cfg, work_dir,
                  lambda: session.cost_model)
    return outcome


def _settle_into(outcome: TuningOutcome, memory, database, mods: list) -> None:
    """With a memory: wait for the tasks other runs tune and take their records, then say
    what the memory did (:meth:`tuner.app.memory_run.RunMemory.settle`)."""
    if memory is None:
        return
    memory.settle(database)
    if memory.claimed:  # their records arrived after tuning
        outcome.best_ms = [None if b is None else b * 1e3
                           for b in best_seconds_per_task(database, mods)]
    outcome.memory = memory.summary()


def _predict_into(outcome: TuningOutcome, tasks: list[TaskInfo], target_info, database,
                  cfg: TuneConfig, work_dir: str, cost_model_factory) -> None:
    """Give every task without a valid measurement the cost model's pick (if enabled)."""
    if not cfg.predict_unmeasured.enabled:
        return
    start = time.perf_counter()
    outcome.predicted = predict_unmeasured(
        tasks, database, work_dir, target_info.target, cost_model_factory,
        cfg.predict_unmeasured, seed=cfg.seed, num_threads=target_info.num_cores)
    outcome.predict_seconds = time.perf_counter() - start
