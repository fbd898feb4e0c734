"""Tune a list of tasks with MetaSchedule's task scheduler, resumably."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from metatune.errors import ConfigError
from tuner.builder import PersistentBuilder, stop_pool
from tuner.database import best_seconds_per_task, measured_per_task
from tuner.durability import RecordFileGuard, as_write_error
from tuner.interrupt import InterruptWatch
from tuner.monitor import FailureMonitor, MonitorCallback, ProgressMonitor
from tuner.rounds import BatchAccuracyCallback, RoundClock, RoundMonitor
from tuner.scheduler import EagerGradientScheduler
from tuner.tasks import TaskInfo

logger = logging.getLogger(__name__)

COST_MODELS = ("metatune", "xgb", "xgb-xfer", "mlp", "random")
SEARCHES = ("bo", "evolutionary", "replay")


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
    """

    trials_before: int
    trials_run: int
    tuning_seconds: float
    failures: int
    best_ms: list[float | None]
    errors: list[tuple[str, int]] = field(default_factory=list)
    rounds: dict = field(default_factory=dict)


def make_cost_model(name: str, num_cores: int, metatune: dict | None = None,
                    xfer: dict | None = None, target=None):
    """A cost model by name: ``metatune``, MetaSchedule's ``xgb``, ``mlp``, ``random``, or
    ``xgb-xfer`` (XGBoost with transfer from the dataset's training split).

    Args:
        name: The cost model.
        num_cores: Cores XGBoost may use.
        metatune: The ``metatune`` config section (checkpoint, graph, ...).
        xfer: The ``xfer`` config section (``data``, ``cache_dir``) for ``xgb-xfer``.
        target: The ``tvm.target.Target`` (``xgb-xfer`` extracts features for it).

    Raises:
        ConfigError: Unknown name.
        tuner.cost_model.CheckpointError: ``metatune`` without a loadable checkpoint.
        tuner.xgb_transfer.XferError: ``xgb-xfer`` without training data.
    """
    from tvm.s_tir import meta_schedule as ms

    if name not in COST_MODELS:
        raise ConfigError(f"unknown cost_model {name!r}: choose one of {', '.join(COST_MODELS)}")
    if name == "metatune":
        from metatune.config import default_checkpoint
        from tuner.cost_model import MetaTuneCostModel, load_net

        m = metatune or {}
        kind = str(target.kind.name) if target is not None else "llvm"
        # Measurements differ per target: the default checkpoint is the target kind's own.
        net = load_net(m.get("checkpoint") or default_checkpoint(kind, m.get("graph", "super")),
                       from_scratch=bool(m.get("from_scratch")))
        return MetaTuneCostModel(net=net, graph=m.get("graph", "super"),
                                 adapt_steps=int(m.get("adapt_steps", 5)),
                                 adapt_lr=float(m.get("adapt_lr", 0.01)))
    if name == "xgb":
        return ms.cost_model.CostModel.create("xgb", num_tuning_cores=num_cores)
    if name == "xgb-xfer":
        from metatune.config import REPO_ROOT
        from tuner.xgb_transfer import XferXGBModel, base_booster

        x = xfer or {}
        rel = lambda p: p if os.path.isabs(p) else os.path.join(REPO_ROOT, p)  # noqa: E731
        data = rel(x.get("data", "data/llvm/train"))
        kind = str(target.kind.name) if target is not None else "llvm"
        if os.path.basename(os.path.dirname(os.path.normpath(data))) not in (kind, ""):
            raise ConfigError(
                f"xgb-xfer pre-trains on {data}, measured for another target than {kind}: "
                f"collect data for {kind} (python collect.py run target={kind} "
                f"out=data/{kind}) and pass xfer.data=data/{kind}/train")
        base = base_booster(data, target, num_cores,
                            rel(x.get("cache_dir", "work/cache")))
        return XferXGBModel(base=base, num_tuning_cores=num_cores)
    if name == "mlp":
        from tuner.mlp import make_mlp_model

        return make_mlp_model()
    return ms.cost_model.CostModel.create(name)


def make_search(name: str, params: dict, clock=None, seed: int = 0):
    """A search strategy by name, wrapped to never measure a schedule twice.

    Args:
        name: ``bo`` (:class:`tuner.bo.BatchBOSearch`), or MetaSchedule's ``evolutionary``
            or ``replay``.
        params: The ``search_params`` config section: ``EvolutionarySearch`` keyword
            arguments, and ``bo`` (:class:`tuner.config.BOConfig` fields).
        clock: A :class:`tuner.rounds.RoundClock` timing each search.
        seed: Seed of the BO sampler.

    Raises:
        ConfigError: Unknown name or parameter.
    """
    from tvm.s_tir import meta_schedule as ms

    from tuner.norepeat import NoRepeatSearch

    params = dict(params)
    bo = params.pop("bo", None) or {}
    if name == "bo":
        from tuner.bo import BatchBOSearch
        from tuner.config import BOConfig

        try:
            ms.search_strategy.EvolutionarySearch(**params)  # validates the sampler's settings
            return NoRepeatSearch(BatchBOSearch(params, BOConfig(**bo), seed), clock=clock)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"search_params: {err}") from err
    if name == "evolutionary":
        try:
            return NoRepeatSearch(ms.search_strategy.EvolutionarySearch(**params), clock=clock)
        except TypeError as err:
            raise ConfigError(f"search_params: {err}") from err
    if name == "replay":
        return NoRepeatSearch(ms.search_strategy.ReplayTrace(), clock=clock)
    raise ConfigError(f"unknown search {name!r}: choose one of {', '.join(SEARCHES)}")


def make_runner(cfg: dict, target_kinds: tuple[str, ...]):
    """MetaSchedule's LocalRunner with a pre-initialized persistent worker."""
    import functools

    from tvm.s_tir import meta_schedule as ms

    from tuner.intrinsics import worker_initializer

    evaluator = ms.runner.EvaluatorConfig(
        number=int(cfg["number"]), repeat=int(cfg["repeat"]),
        min_repeat_ms=int(cfg["min_repeat_ms"]),
        enable_cpu_cache_flush=bool(cfg["enable_cpu_cache_flush"]),
    )
    return ms.runner.LocalRunner(
        timeout_sec=float(cfg["timeout_sec"]), evaluator_config=evaluator,
        initializer=functools.partial(worker_initializer, target_kinds),
    )


def task_loggers(work_dir: str, names: list[str]) -> list:
    """MetaSchedule's per-task loggers writing to ``<work_dir>/logs``, quiet on the console.

    MetaSchedule echoes every task-scheduler table to stdout; its full DEBUG log stays in
    the work dir and only warnings reach the console. Handlers other code attached to its
    logger without a name (pytest's capture handlers) would break its ``dictConfig``, so
    they are detached for the call and put back.
    """
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir

    ms_logger = logging.getLogger("tvm.s_tir.meta_schedule")
    if ms_logger.level == logging.NOTSET:
        ms_logger.setLevel(logging.INFO)
    unnamed = [h for h in ms_logger.handlers if h.get_name() is None]
    for handler in unnamed:
        ms_logger.removeHandler(handler)
    try:
        loggers = get_loggers_from_work_dir(work_dir, names)
    finally:
        for handler in unnamed:
            ms_logger.addHandler(handler)
    for handler in ms_logger.handlers:
        if handler.get_name() == "tvm.s_tir.meta_schedule.console":
            handler.setLevel(logging.WARNING)
    return loggers


def make_contexts(tasks: list[TaskInfo], target, search, work_dir: str, seed: int,
                  num_threads: int) -> list:
    """One ``TuneContext`` per task, in the same order as ``tasks``."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.utils import fork_seed

    loggers = task_loggers(work_dir, [t.name for t in tasks])
    seeds = fork_seed(seed, n=len(tasks))
    return [
        ms.TuneContext(
            mod=t.extracted.dispatched[0], target=target, space_generator="post-order-apply",
            search_strategy=search, task_name=t.name, logger=lg, rand_state=rs,
            num_threads=num_threads,
        ).clone()
        for t, lg, rs in zip(tasks, loggers, seeds)
    ]


def tune(tasks: list[TaskInfo], target_info, database, cfg: dict, work_dir: str,
         writer=None) -> TuningOutcome:
    """Tune ``tasks`` until the database holds ``cfg['trials']`` measurements of them.

    Measurements already in the database count toward the budget, so a second run with
    the same work dir continues where the first stopped and re-measures nothing.

    Args:
        tasks: The tasks to tune.
        target_info: A :class:`tuner.targets.TargetInfo`.
        database: The MetaSchedule database (records are appended to it).
        cfg: The tune configuration (plain dict).
        work_dir: The work directory.
        writer: TensorBoard ``SummaryWriter`` or ``None``.

    Returns:
        A :class:`TuningOutcome`.

    Raises:
        TuningStalledError: Several rounds in a row measured nothing valid.
        WorkDirError: A round's records did not reach the disk (full or unwritable).
    """
    from tvm.s_tir import meta_schedule as ms

    mods = [t.extracted.dispatched[0] for t in tasks]
    before = measured_per_task(database, mods)
    trials_before = sum(before)
    remaining = int(cfg["trials"]) - trials_before
    best = best_seconds_per_task(database, mods)
    if remaining <= 0:
        logger.info("database already holds %d measurements (budget %d): nothing to tune",
                    trials_before, cfg["trials"])
        return TuningOutcome(trials_before, 0, 0.0, 0,
                             [None if b is None else b * 1e3 for b in best])
    if trials_before:
        logger.info("resuming: %d measurements in the database, %d to go",
                    trials_before, remaining)

    cost_model = make_cost_model(cfg["cost_model"], target_info.num_cores, cfg["metatune"],
                                 cfg["xfer"], target_info.target)
    kinds = (target_info.kind,)
    builder = PersistentBuilder(
        max_workers=int(cfg["builder"]["workers"] or target_info.num_cores),
        timeout_sec=float(cfg["builder"]["timeout_sec"]), target_kinds=kinds)
    builder.warm_up()
    runner = make_runner(cfg["runner"], kinds)
    clock = RoundClock()
    search = make_search(cfg["search"], dict(cfg["search_params"]), clock, int(cfg["seed"]))
    contexts = make_contexts(tasks, target_info.target, search, work_dir, int(cfg["seed"]),
                             target_info.num_cores)
    names = [t.name for t in tasks]
    failures = FailureMonitor(max_failed_rounds=int(cfg["max_failed_rounds"]), task_names=names)
    progress = ProgressMonitor(
        task_names=names, task_weights=[t.weight for t in tasks], best_seconds=best,
        budget=remaining, work_dir=work_dir, trials_before=trials_before, writer=writer,
        show_bar=bool(cfg["progress"]))
    rounds = RoundMonitor(clock, names, work_dir, writer, trials_before)
    guard = RecordFileGuard(work_dir)  # first: a round not on disk is never counted
    interrupt = InterruptWatch()
    # Order matters: the batch is scored before the cost model learns from it
    # (UpdateCostModel is among the defaults), and the round closes after the update.
    callbacks = [BatchAccuracyCallback(clock, cost_model, progress.best),
                 *ms.measure_callback.MeasureCallback.create("default"),
                 MonitorCallback([guard, interrupt, failures, progress, rounds])]
    per_task = cfg["trials_per_task"]
    start = time.perf_counter()
    interrupt.__enter__()
    try:
        EagerGradientScheduler().tune(
            tasks=contexts,
            task_weights=[float(t.weight) for t in tasks],
            max_trials_global=remaining,
            max_trials_per_task=int(per_task) if per_task else remaining,
            num_trials_per_iter=int(cfg["trials_per_round"]),
            builder=builder,
            runner=runner,
            measure_callbacks=callbacks,
            database=database,
            cost_model=cost_model,
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
        builder.shutdown()
        stop_pool(runner.pool)
    if interrupt.seen:
        raise KeyboardInterrupt
    seconds = time.perf_counter() - start
    return TuningOutcome(
        trials_before=trials_before,
        trials_run=progress.done,
        tuning_seconds=seconds,
        failures=failures.failures,
        best_ms=[None if b is None else b * 1e3 for b in progress.best],
        errors=failures.errors.most_common(5),
        rounds=rounds.summary(),
    )
