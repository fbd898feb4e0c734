"""Tune a list of tasks with MetaSchedule's task scheduler, resumably."""

from __future__ import annotations

import functools
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from metatune.config import DEFAULT_DATA_DIR, default_checkpoint
from metatune.dataset import as_split_dirs
from metatune.errors import ConfigError
from tuner.app.checkpoints import (default_checkpoint_for, default_xfer_data, own_checkpoint,
                                   own_train_command)
from tuner.app.config import RunnerConfig, SearchParams, TuneConfig
from tuner.app.monitor import FailureMonitor, MonitorCallback, ProgressMonitor
from tuner.app.rounds import BatchAccuracyCallback, RoundClock, RoundMonitor
from tuner.engine.builder import PersistentBuilder, stop_pool
from tuner.engine.database import best_seconds_per_task, measured_per_task
from tuner.engine.durability import RecordFileGuard, as_write_error
from tuner.engine.interrupt import InterruptWatch
from tuner.engine.intrinsics import worker_initializer
from tuner.engine.norepeat import NoRepeatSearch
from tuner.engine.platforms import dataset_kind
from tuner.engine.scheduler import EagerGradientScheduler, RoundBudget
from tuner.engine.targets import TargetInfo
from tuner.engine.tasks import TaskInfo
from tuner.models import COST_MODELS
from tuner.models.cost_model import MetaTuneCostModel, load_model
from tuner.models.ensemble import EnsembleCostModel
from tuner.models.mlp import make_mlp_model
from tuner.models.params import MetaTuneModelConfig, XferConfig
from tuner.models.xgb_transfer import XferXGBModel, base_booster
from tuner.search.bo import BatchBOSearch
from metatune.device import resolve_device
from tuner.engine.rpc import make_rpc_runner
from tuner.search.params import SEARCHES
from tuner.search.rl import RLSearch
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


def make_cost_model(name: str, *, num_cores: int, metatune: MetaTuneModelConfig | None = None,
                    xfer: XferConfig | None = None, target=None, device: str = "auto",
                    layout: str | None = None):
    """A cost model by name: ``metatune``, MetaSchedule's ``xgb``, ``mlp``, ``random``, or
    ``xgb-xfer`` (XGBoost with transfer from the dataset's training split).

    Args:
        name: The cost model.
        num_cores: Cores XGBoost may use.
        metatune: The ``metatune`` section (checkpoint, graph, ...; ``None``: its defaults).
        xfer: The ``xfer`` section (``data``, ``cache_dir``) for ``xgb-xfer`` (``None``:
            its defaults).
        target: The ``tvm.target.Target`` (``xgb-xfer`` extracts features for it).
        device: Where MetaTune's GCN embeds and fine-tunes (:mod:`metatune.device`).
        layout: The data layout the tasks' convolutions are extracted in (``metatune``
            notes when its training data has none of that layout).

    Raises:
        ConfigError: Unknown name.
        tuner.models.cost_model.CheckpointError: ``metatune`` without a loadable checkpoint.
        tuner.models.xgb_transfer.XferError: ``xgb-xfer`` without training data.
    """
    from tvm.s_tir import meta_schedule as ms

    if name not in COST_MODELS:
        raise ConfigError(f"unknown cost_model {name!r}: choose one of {', '.join(COST_MODELS)}")
    if name == "metatune":
        m = metatune or MetaTuneModelConfig()
        checkpoint, *paths = metatune_checkpoints(m, target)
        model = load_model(checkpoint, graph=m.graph, from_scratch=bool(m.from_scratch))
        more = [load_model(c, graph=m.graph) for c in paths]
        for member in [model, *more]:
            member.inner.override(steps=m.adapt_steps, lr=m.adapt_lr)
        if target is not None:
            own = own_checkpoint(target, m.graph)
            if own and checkpoint and os.path.exists(checkpoint) and os.path.samefile(
                    own, checkpoint):
                own = None  # it is the one loaded
            note = model.platform_note(
                target, own_checkpoint=own,
                train_command=None if own else own_train_command(target, m.graph, checkpoint))
            if note:  # a warning only when none of its data is of this CPU
                logger.log(logging.INFO if model.covers(target) else logging.WARNING,
                           "%s", note)
        if layout and (note := model.layout_note(layout)):
            logger.info("%s", note)
        if more:
            logger.info("cost model: the mean of %d checkpoints (%s)", 1 + len(more),
                        ", ".join(os.path.basename(c) for c in [checkpoint, *paths]))
            return EnsembleCostModel(models=[model, *more], graph=m.graph,
                                     device=resolve_device(device))
        return MetaTuneCostModel(model=model, graph=m.graph, device=resolve_device(device))
    if name == "xgb":
        return ms.cost_model.CostModel.create("xgb", num_tuning_cores=num_cores)
    if name == "xgb-xfer":
        x = xfer or XferConfig()
        # absolute when given (resolved when the section was made); else the platform's
        data = x.data or (default_xfer_data(target) if target is not None
                          else os.path.join(DEFAULT_DATA_DIR, "train"))
        kind = str(target.kind.name) if target is not None else "llvm"
        for split in as_split_dirs(data):
            measured = dataset_kind(split)
            if measured not in (kind, None):
                raise ConfigError(
                    f"xgb-xfer pre-trains on {split}, measured for target kind {measured}, "
                    f"not {kind}: collect data for {kind} (python collect.py run "
                    f"target={kind}); a dataset of the target's own platform is then found "
                    "by itself")
        base = base_booster(data, target, num_cores, x.cache_dir)
        return XferXGBModel(base=base, num_tuning_cores=num_cores)
    if name == "mlp":
        return make_mlp_model()
    return ms.cost_model.CostModel.create(name)


def metatune_checkpoints(m: MetaTuneModelConfig, target=None) -> list:
    """The checkpoints the MetaTune cost model loads: ``m.checkpoint`` (else the target's
    own platform's, else the shipped one of its kind; ``None`` from scratch), then those
    averaged with it (its seed siblings by default)."""
    checkpoint = m.checkpoint or (default_checkpoint_for(target, m.graph)
                                  if target is not None else default_checkpoint(graph=m.graph))
    return [checkpoint, *m.members(checkpoint)]


def make_search(name: str, params: SearchParams | None = None, *, clock=None, seed: int = 0,
                budget=None, device: str = "auto"):
    """A search strategy by name, wrapped to never measure a schedule twice.

    Args:
        name: ``bo`` (:class:`tuner.search.bo.BatchBOSearch`), ``rl``
            (:class:`tuner.search.rl.RLSearch`), or MetaSchedule's ``evolutionary`` or
            ``replay``.
        params: The ``search_params`` section: ``EvolutionarySearch`` keyword arguments,
            ``bo`` and ``rl`` (a :class:`tuner.search.params.BOConfig` and
            :class:`tuner.search.params.RLConfig`, valid since they were made; ``None``:
            the defaults).
        clock: A :class:`tuner.app.rounds.RoundClock` timing each search.
        seed: Seed of the BO sampler and of the RL search.
        budget: The run's :class:`tuner.engine.scheduler.RoundBudget` (cuts each round to
            the size the scheduler sets).
        device: Where BO's GP runs (:mod:`metatune.device`).

    Raises:
        ConfigError: Unknown name or parameter.
    """
    from tvm.s_tir import meta_schedule as ms

    params = params or SearchParams()
    evolutionary = params.evolutionary()
    if name == "bo":
        try:
            ms.search_strategy.EvolutionarySearch(**evolutionary)  # TVM checks the sampler's
        except (TypeError, ValueError) as err:
            raise ConfigError(f"search_params: {err}") from err
        return NoRepeatSearch(BatchBOSearch(evolutionary, params.bo, seed, device),
                              clock=clock, budget=budget)
    if name == "rl":
        return NoRepeatSearch(RLSearch(params.rl, seed, device), clock=clock, budget=budget)
    if name == "evolutionary":
        try:
            return NoRepeatSearch(ms.search_strategy.EvolutionarySearch(**evolutionary),
                                  clock=clock, budget=budget)
        except TypeError as err:
            raise ConfigError(f"search_params: {err}") from err
    if name == "replay":
        return NoRepeatSearch(ms.search_strategy.ReplayTrace(), clock=clock, budget=budget)
    raise ConfigError(f"unknown search {name!r}: choose one of {', '.join(SEARCHES)}")


def make_runner(cfg: RunnerConfig, target_kinds: tuple[str, ...], num_threads: int):
    """MetaSchedule's LocalRunner with a pre-initialized persistent worker, or its RPCRunner
    on the servers behind a tracker (``runner.kind=rpc``).

    Args:
        cfg: The ``runner`` section.
        target_kinds: Target kinds whose tensor intrinsics the worker registers.
        num_threads: Threads of the worker's TVM runtime: the target's cores, so that
            candidates are timed the way the tuned network will run.

    Raises:
        RunnerUnavailableError: ``rpc`` without a tracker or a server under the key.
    """
    from tvm.s_tir import meta_schedule as ms

    evaluator = ms.runner.EvaluatorConfig(
        number=cfg.number, repeat=cfg.repeat, min_repeat_ms=cfg.min_repeat_ms,
        enable_cpu_cache_flush=cfg.enable_cpu_cache_flush,
    )
    if cfg.kind == "rpc":  # the servers time with their own runtime's threads
        return make_rpc_runner(cfg.rpc, evaluator,
                               initializer=functools.partial(worker_initializer, target_kinds,
                                                             int(num_threads)))
    return ms.runner.LocalRunner(
        timeout_sec=cfg.timeout_sec, evaluator_config=evaluator,
        initializer=functools.partial(worker_initializer, target_kinds, int(num_threads)),
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


def make_contexts(tasks: list[TaskInfo], *, target, search, work_dir: str, seed: int,
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


@dataclass
class Session:
    """What one tuning session measures with, built once by :func:`build_session`.

    Attributes:
        target: The :class:`tuner.engine.targets.TargetInfo` tuned for.
        cost_model: The MetaSchedule cost model (see :func:`make_cost_model`).
        builder: The persistent builder pool, warmed up (shut down by :meth:`close`).
        runner: MetaSchedule's ``LocalRunner`` with a pre-initialized worker.
        clock: The :class:`tuner.app.rounds.RoundClock` the search reports to.
        search: The search strategy, wrapped to never measure a schedule twice.
        seed: The session's seed (tune contexts' random states, the BO and RL searches).
    """

    target: TargetInfo
    cost_model: Any
    builder: PersistentBuilder
    runner: Any
    clock: RoundClock
    search: Any
    seed: int

    def contexts(self, tasks: list[TaskInfo], work_dir: str) -> list:
        """One ``TuneContext`` per task (see :func:`make_contexts`), searching with a clone
        of the session's search."""
        return make_contexts(tasks, target=self.target.target, search=self.search,
                             work_dir=work_dir, seed=self.seed,
                             num_threads=self.target.num_cores)

    def close(self) -> None:
        """Shut the builder and runner pools down (workers killed if they do not stop)."""
        self.builder.shutdown()
        stop_pool(self.runner.pool)


def build_cost_model(cfg: TuneConfig, target: TargetInfo):
    """The configuration's cost model (:func:`make_cost_model` with its typed sections)."""
    return make_cost_model(cfg.cost_model, num_cores=target.num_cores, metatune=cfg.metatune,
                           xfer=cfg.xfer, target=target.target, device=cfg.device,
                           layout=cfg.layout)


def build_session(cfg: TuneConfig, target: TargetInfo, *,
                  budget: RoundBudget | None = None) -> Session:
    """The cost model, builder, runner and search of one tuning session, by configuration.

    ``tune()``, the dataset collector and the trial-overhead benchmark all build their
    sessions here.

    Args:
        cfg: The tune configuration; its ``cost_model``, ``metatune``, ``xfer``,
            ``builder``, ``runner``, ``search``, ``search_params`` and ``seed`` are read.
        target: The :class:`tuner.engine.targets.TargetInfo` to tune for.
        budget: The run's :class:`tuner.engine.scheduler.RoundBudget`, shared by the
            search (which cuts its batches to it) and the task scheduler.

    Raises:
        ConfigError: An unknown cost model or search, or a bad search parameter.
        tuner.models.cost_model.CheckpointError: ``metatune`` without a loadable checkpoint.
    """
    resolve_device(cfg.device)  # a GPU asked for and absent: one line, before anything starts
    cost_model = build_cost_model(cfg, target)
    kinds = (target.kind,)
    runner = make_runner(cfg.runner, kinds, target.num_cores)  # an absent tracker: before any pool
    builder = PersistentBuilder(max_workers=cfg.builder.workers or target.num_cores,
                                timeout_sec=cfg.builder.timeout_sec, target_kinds=kinds)
    builder.warm_up()
    clock = RoundClock()
    search = make_search(cfg.search, cfg.search_params, clock=clock, seed=cfg.seed,
                         budget=budget, device=cfg.device)
    return Session(target=target, cost_model=cost_model, builder=builder, runner=runner,
                   clock=clock, search=search, seed=cfg.seed)


def tune(tasks: list[TaskInfo], *, target_info, database, cfg: TuneConfig, work_dir: str,
         writer=None) -> TuningOutcome:
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
    remaining = cfg.trials - trials_before
    per_task = cfg.trials_per_task
    task_left = None if per_task is None else [max(0, per_task - b) for b in before]
    if task_left is not None:  # a resumed run tops each task up to its share
        remaining = min(remaining, sum(task_left))
    best = best_seconds_per_task(database, mods)
    if remaining <= 0:
        logger.info("database already holds %d measurements (budget %d%s): nothing to tune",
                    trials_before, cfg.trials,
                    "" if per_task is None else f", {per_task} a task")
        outcome = TuningOutcome(trials_before, 0, 0.0, 0,
                                [None if b is None else b * 1e3 for b in best],
                                trials_per_task=list(before))
        _predict_into(outcome, tasks, target_info, database, cfg, work_dir,
                      lambda: build_cost_model(cfg, target_info))
        return outcome
    if trials_before:
        logger.info("resuming: %d measurements in the database, %d to go",
                    trials_before, remaining)

    budget = RoundBudget(remaining)
    session = build_session(cfg, target_info, budget=budget)
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
                 MonitorCallback([guard, interrupt, failures, progress, rounds])]
    start = time.perf_counter()
    interrupt.__enter__()
    try:
        EagerGradientScheduler(budget=budget, trials_per_round=cfg.trials_per_round,
                               task_left=task_left).tune(
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
        trials_per_task=[b + n for b, n in zip(before, progress.per_task)],
    )
    _predict_into(outcome, tasks, target_info, database, cfg, work_dir,
                  lambda: session.cost_model)
    return outcome


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
