"""A search-strategy wrapper that never measures the same candidate twice, across runs.

MetaSchedule's strategies remember what they measured in the current run (and the
database's top-k), but a resumed run may propose a candidate measured earlier. This
wrapper hashes every proposed schedule (``structural_hash`` of the scheduled module),
drops those already in the database or in this run, and tells the wrapped strategy their
known results so its state stays consistent.
"""

from __future__ import annotations

import logging

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

logger = logging.getLogger(__name__)


def replay(trace, mod, postprocs=None):
    """A stored trace applied to ``mod`` the way a search builds a candidate.

    Searches apply a trace without its postprocessing instructions and run the
    postprocessors again; replaying the stored postprocessing instructions instead gives
    a module that differs after the database's JSON round trip (a layout-rewrite
    annotation ``True`` comes back as ``1``), so the same schedule would hash apart and be
    measured again.

    Args:
        trace: The stored ``Trace``.
        mod: The task's ``IRModule``.
        postprocs: The context's postprocessors (``None``: replay the stored ones).

    Returns:
        The ``Schedule``.
    """
    from tvm.s_tir import Schedule

    if postprocs:
        sch = Schedule(mod)
        trace.apply_to_schedule(sch, remove_postproc=True)
        if all(p.apply(sch) for p in postprocs):
            return sch
    sch = Schedule(mod)
    trace.apply_to_schedule(sch, remove_postproc=False)
    return sch


def measured_schedules(database, mod, postprocs=None) -> list[tuple[int, object,
                                                                    list[float] | None]]:
    """The schedules already measured for workload ``mod``, replayed as candidates.

    Args:
        database: A MetaSchedule database (may be ``None``).
        mod: The task's ``IRModule``.
        postprocs: The task context's postprocessors (see :func:`replay`).

    Returns:
        ``(structural_hash(scheduled module), schedule, run_secs or None)`` per record, in
        the order the database lists them (not sorted by run time).
    """
    from tvm_ffi import structural_hash

    if database is None or not database.has_workload(mod):
        return []
    workload = database.commit_workload(mod)
    out = []
    for record in database.get_all_tuning_records():
        if not record.workload.same_as(workload):
            continue
        try:
            sch = replay(record.trace, mod, postprocs)
        except Exception as err:  # a record from another TVM version may not replay
            logger.debug("record trace does not replay: %s", err)
            continue
        secs = [float(s) for s in record.run_secs] if record.run_secs else None
        out.append((structural_hash(sch.mod), sch, secs))
    return out


class PreloadedRecords:
    """For a search inside :class:`NoRepeatSearch`: take the task's measured records from the
    wrapper, which replays them once for both, or replay them itself when used alone."""

    _preloaded: list | None = None

    def preload_measured(self, known: list) -> None:
        """Hand over the task's database records, already replayed, for the next
        ``pre_tuning`` (which would otherwise replay them itself).

        Args:
            known: :func:`measured_schedules` of this task's database.
        """
        self._preloaded = list(known)

    def take_measured(self, database, mod, postprocs) -> list:
        """The records handed over (once), else :func:`measured_schedules` of ``database``."""
        known, self._preloaded = self._preloaded, None
        return known if known is not None else measured_schedules(database, mod, postprocs)


@derived_object
class NoRepeatSearch(PySearchStrategy):
    """Wraps a search strategy so that no schedule is measured twice.

    Args:
        inner: The wrapped MetaSchedule search strategy.
        max_regenerate: Batches drawn in a row that may be all repeats before the space
            is considered exhausted.
        clock: A :class:`tuner.app.rounds.RoundClock` told when each search starts and ends.
        budget: A :class:`tuner.engine.scheduler.RoundBudget` shared with the task
            scheduler: each batch is cut to the round size it sets (the cut candidates are
            neither measured nor reported to the inner strategy, which may propose them
            again).
    """

    def __init__(self, inner, max_regenerate: int = 8, clock=None, budget=None) -> None:
        super().__init__()
        self.inner = inner
        self.max_regenerate = int(max_regenerate)
        self.clock = clock
        self.budget = budget
        self.known: dict[int, list[float] | None] = {}
        self.skipped = 0
        self._batch: tuple | None = None
        self._mod = None
        self._postprocs: list = []

    def _initialize_with_tune_context(self, context) -> None:
        self._mod = context.mod
        self._postprocs = list(context.space_generator.postprocs or [])
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None,
                   cost_model=None) -> None:
        schedules = measured_schedules(database, self._mod, self._postprocs)
        self.known = {h: secs for h, _, secs in schedules}
        preload = getattr(self.inner, "preload_measured", None)
        if preload is not None:  # one replay of the records serves both
            preload(schedules)
        if self.known:
            logger.info("%d candidates already measured: they will not be measured again",
                        len(self.known))
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database,
                              cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def generate_measure_candidates(self):
        if self.clock is not None:
            self.clock.start_search()
        try:
            return self._generate()
        finally:
            if self.clock is not None:
                self.clock.end_search()

    def _generate(self):
        from tvm_ffi import structural_hash

        for _ in range(self.max_regenerate):
            candidates = self.inner.generate_measure_candidates()
            if candidates is None:
                return None
            candidates = list(candidates)
            hashes = [structural_hash(c.sch.mod) for c in candidates]
            keep, seen = [], set()
            for i, h in enumerate(hashes):
                if h not in self.known and h not in seen:
                    keep.append(i)
                    seen.add(h)
            self.skipped += len(candidates) - len(keep)
            cut: set[int] = set()
            if keep and self.budget is not None:
                n = self.budget.take(len(keep))
                if n == 0:
                    return None  # the run's budget is spent
                cut = set(keep[n:])
                keep = keep[:n]
            self._batch = (candidates, hashes, keep, cut)
            if keep:
                return [candidates[i] for i in keep]
            self.notify_runner_results([], [])  # all repeats: feed known results, draw again
        logger.warning("%d batches in a row held only measured candidates: stopping this task",
                       self.max_regenerate)
        return None

    def notify_runner_results(self, measure_candidates, results) -> None:
        from tvm.s_tir.meta_schedule.runner import RunnerResult

        candidates, hashes, keep, cut = self._batch
        by_index = dict(zip(keep, results, strict=False))
        told, full = [], []
        for i, h in enumerate(hashes):
            if i in cut:
                continue  # cut from the round: not measured, nothing to report
            if i in by_index:
                res = by_index[i]
                self.known[h] = [float(s) for s in res.run_secs] if res.run_secs else None
                full.append(res)
            else:
                secs = self.known.get(h)
                full.append(RunnerResult(secs, None if secs else "already measured (failed)"))
            told.append(candidates[i])
        self._batch = None
        self.inner.notify_runner_results(told, full)

    def clone(self) -> "NoRepeatSearch":
        return NoRepeatSearch(self.inner.clone(), self.max_regenerate, self.clock, self.budget)
