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


def measured_schedules(database, mod) -> list[tuple[int, object, list[float] | None]]:
    """The schedules already measured for workload ``mod``, replayed.

    Args:
        database: A MetaSchedule database (may be ``None``).
        mod: The task's ``IRModule``.

    Returns:
        ``(structural_hash(scheduled module), schedule, run_secs or None)`` per record, in
        the order the database lists them (not sorted by run time).
    """
    from tvm.s_tir import Schedule
    from tvm_ffi import structural_hash

    if database is None or not database.has_workload(mod):
        return []
    workload = database.commit_workload(mod)
    out = []
    for record in database.get_all_tuning_records():
        if not record.workload.same_as(workload):
            continue
        try:
            sch = Schedule(mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
        except Exception as err:  # a record from another TVM version may not replay
            logger.debug("record trace does not replay: %s", err)
            continue
        secs = [float(s) for s in record.run_secs] if record.run_secs else None
        out.append((structural_hash(sch.mod), sch, secs))
    return out


@derived_object
class NoRepeatSearch(PySearchStrategy):
    """Wraps a search strategy so that no schedule is measured twice.

    Args:
        inner: The wrapped MetaSchedule search strategy.
        max_regenerate: Batches drawn in a row that may be all repeats before the space
            is considered exhausted.
        clock: A :class:`tuner.app.rounds.RoundClock` told when each search starts and ends.
    """

    def __init__(self, inner, max_regenerate: int = 8, clock=None) -> None:
        super().__init__()
        self.inner = inner
        self.max_regenerate = int(max_regenerate)
        self.clock = clock
        self.known: dict[int, list[float] | None] = {}
        self.skipped = 0
        self._batch: tuple | None = None
        self._mod = None

    def _initialize_with_tune_context(self, context) -> None:
        self._mod = context.mod
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None,
                   cost_model=None) -> None:
        schedules = measured_schedules(database, self._mod)
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
            self._batch = (candidates, hashes, keep)
            if keep:
                return [candidates[i] for i in keep]
            self.notify_runner_results([], [])  # all repeats: feed known results, draw again
        logger.warning("%d batches in a row held only measured candidates: stopping this task",
                       self.max_regenerate)
        return None

    def notify_runner_results(self, measure_candidates, results) -> None:
        from tvm.s_tir.meta_schedule.runner import RunnerResult

        candidates, hashes, keep = self._batch
        by_index = dict(zip(keep, results))
        full = []
        for i, h in enumerate(hashes):
            if i in by_index:
                res = by_index[i]
                self.known[h] = [float(s) for s in res.run_secs] if res.run_secs else None
                full.append(res)
            else:
                secs = self.known.get(h)
                full.append(RunnerResult(secs, None if secs else "already measured (failed)"))
        self._batch = None
        self.inner.notify_runner_results(candidates, full)

    def clone(self) -> "NoRepeatSearch":
        return NoRepeatSearch(self.inner.clone(), self.max_regenerate, self.clock)
