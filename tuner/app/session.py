"""One tuning session: the cost model, builder, runner and search it measures with
(:func:`build_session` -> :class:`Session`), shared by ``tune()``, the dataset collector and
the trial-overhead benchmark, and the per-task ``TuneContext`` s it tunes."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from metatune.device import resolve_device
from tuner.app.config import TuneConfig
from tuner.app.factories import make_cost_model, make_runner, make_search
from tuner.app.rounds import RoundClock
from tuner.engine.builder import PersistentBuilder, stop_pool
from tuner.engine.scheduler import RoundBudget
from tuner.engine.targets import TargetInfo
from tuner.engine.tasks import TaskInfo

logger = logging.getLogger(__name__)


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
        for t, lg, rs in zip(tasks, loggers, seeds, strict=True)
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
    clock = RoundClock()
    search = make_search(cfg.search, cfg.search_params, clock=clock, seed=cfg.seed,
                         budget=budget, device=cfg.device)  # a bad parameter: before any pool
    runner = make_runner(cfg.runner, kinds, target.num_cores)  # an absent tracker: before any pool
    builder = PersistentBuilder(max_workers=cfg.builder.workers or target.num_cores,
                                timeout_sec=cfg.builder.timeout_sec, target_kinds=kinds)
    builder.warm_up()
    return Session(target=target, cost_model=cost_model, builder=builder, runner=runner,
                   clock=clock, search=search, seed=cfg.seed)
