"""A search wrapper whose first round starts from transferred schedules
(:func:`tuner.search.transfer.with_transfer` makes it).

In a task's first round it asks its provider for the task's transferred candidates, asks
the wrapped search for its own batch as usual, and proposes the transferred ones first, up
to ``share`` of the round, then the search's own to fill the round; the search's own that
do not fit are dropped (it may propose them again). The wrapped search is told every
measured result, the transferred ones included: BO fits its GP to them, MetaSchedule's
evolutionary search counts them (and finds them in the database as the task's best
measured), RL records them. Every later round is the wrapped search's alone. A task that
already has measurements in the database (a resumed run) gets no transfer.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from tuner.search.transfer_replay import ReplayStats

logger = logging.getLogger(__name__)


@dataclass
class TransferTally:
    """What schedule transfer gave over a run's tasks (shared by every task's search).

    Attributes:
        tasks: Tasks whose first round asked for transferred candidates.
        served: Tasks that got at least one.
        candidates: Transferred candidates put in first rounds.
        replay: Replay counts over all tasks.
        seconds: Time spent finding and replaying them.
    """

    tasks: int = 0
    served: int = 0
    candidates: int = 0
    replay: ReplayStats = field(default_factory=ReplayStats)
    seconds: float = 0.0

    def summary(self) -> str:
        """One line for the log or the report."""
        rate = self.replay.applied / self.replay.tried if self.replay.tried else 0.0
        return (f"schedule transfer: {self.candidates} candidates for {self.served} of "
                f"{self.tasks} tasks ({self.replay.applied} of {self.replay.tried} replays "
                f"applied, {rate:.0%}; {self.replay.refitted} with re-decided tiles; "
                f"{self.seconds:.1f} s)")


def _has_measurements(database, mod) -> bool:
    """Whether ``database`` holds a record of workload ``mod``."""
    if not database.has_workload(mod):
        return False
    return len(database.get_top_k(database.commit_workload(mod), 1)) > 0


@derived_object
class TransferSearch(PySearchStrategy):
    """Puts a task's transferred candidates first in its first round.

    Args:
        inner: The wrapped search strategy.
        provider: ``provider(context, k) -> (candidates, ReplayStats)``: the task's
            transferred ``MeasureCandidate`` s, best first.
        share: At most this share of the first round is transferred (at least one
            candidate when there are any, unless ``share`` is 0).
        k: Candidates asked of the provider (``None``: as many as ``share`` lets in).
        tally: Counts over every task's first round (:class:`TransferTally`).
    """

    def __init__(self, inner, provider, share: float = 0.5, k: int | None = None,
                 tally: TransferTally | None = None) -> None:
        super().__init__()
        if not 0.0 <= float(share) <= 1.0:
            raise ValueError(f"transfer share={share}: give a fraction of the round in [0, 1]")
        self.inner = inner
        self.provider = provider
        self.share = float(share)
        self.k = k
        self.tally = tally if tally is not None else TransferTally()
        self.context = None
        self.batch = 0
        self.first = False
        self._measured: int | None = None

    def _initialize_with_tune_context(self, context) -> None:
        self.context = context
        self.inner._initialize_with_tune_context(context)

    def preload_measured(self, known: list) -> None:
        """The task's measured records, replayed once by the ``NoRepeatSearch`` outside
        (handed on to the wrapped search when it takes them)."""
        self._measured = len(known)
        preload = getattr(self.inner, "preload_measured", None)
        if preload is not None:
            preload(known)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None,
                   cost_model=None) -> None:
        measured = (self._measured > 0 if self._measured is not None
                    else database is not None and _has_measurements(database,
                                                                     self.context.mod))
        self._measured = None
        self.batch = int(num_trials_per_iter)
        self.first = not measured and self.share > 0
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database,
                              cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def _transferred(self, room: int) -> list:
        """The task's transferred candidates (at most ``room``); none if the provider
        fails (with a warning: the round goes on with the search's own)."""
        start = time.perf_counter()
        try:
            candidates, stats = self.provider(self.context, self.k or room)
        except Exception as err:  # noqa: BLE001 - transfer must never stop a tuning run
            why = (str(err).strip().splitlines() or [type(err).__name__])[-1]
            logger.warning("%s: schedule transfer failed (%s); the search starts alone",
                           getattr(self.context, "task_name", "task"), why)
            candidates, stats = [], ReplayStats()
        candidates = list(candidates)[:room]
        self.tally.tasks += 1
        self.tally.served += bool(candidates)
        self.tally.candidates += len(candidates)
        self.tally.replay.add(stats)
        self.tally.seconds += time.perf_counter() - start
        return candidates

    def generate_measure_candidates(self):
        if not self.first:
            return self.inner.generate_measure_candidates()
        self.first = False
        room = max(1, math.floor(self.share * self.batch)) if self.batch else 0
        transferred = self._transferred(room)
        own = self.inner.generate_measure_candidates()
        if own is None:  # the search has nothing (its budget spent, or no sample)
            return transferred or None
        own = list(own)[: max(0, self.batch - len(transferred))]
        return transferred + own

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self) -> TransferSearch:
        return TransferSearch(self.inner.clone(), self.provider, self.share, self.k,
                              self.tally)
