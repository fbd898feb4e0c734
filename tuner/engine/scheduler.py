"""A task scheduler that commits every round at once and allocates trials by gradient.

MetaSchedule's ``gradient`` scheduler sends the first round of *every* task before it
joins any: for resnet-18 (19 tasks, 16 trials a round) nothing reaches the database
until 304 trials were spent, so an interrupted run loses everything and the progress
bar stands still. Its runner also measures one task while the next task's search keeps
both cores busy. This scheduler joins each round before choosing the next task (results
are committed and reported immediately; measurements run on an otherwise idle machine),
then allocates like Ansor/MetaSchedule's gradient scheduler: first one round per task,
heaviest first, then the task whose weighted latency is expected to drop the most.

With ``first_round`` set (config ``first_round_trials``), a task's first round in a run is
that small (a look, the cost model's best-ranked candidates), and a task the database
already holds that many measurements of skips the first pass (its best so far seeds the
gradient): the budget then goes where the network's latency is, not evenly. Without it
(the default until its A/B), each run's first pass gives every task a full round, which
at budgets under ``tasks x trials_per_round`` (regnet_y_400mf: 47 x 16 = 752) spreads the
whole budget evenly, a run resumed after an earlier one included.

The budget is exact and reaches every task: the scheduler sets each round's size in a
:class:`RoundBudget` shared with every task's search, which cuts its batch to it. In the
first pass a round gets at most an even share of what is left, so a budget smaller than
``tasks x trials_per_round`` still measures every task (alexnet's 13 tasks at 128 trials:
9 or 10 each) instead of leaving the last tasks with TVM's default schedule; the last
round is cut to what is left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.task_scheduler import PyTaskScheduler

from metatune.records import measured_seconds


@dataclass
class RoundBudget:
    """The trials this run may still measure, and the size of the round being drawn.

    One instance is shared by the scheduler (which sets :attr:`limit` before each round)
    and the searches of every task (which call :meth:`take` to cut their batch).

    Attributes:
        remaining: Trials this run may still measure.
        limit: The size of the next round (``None``: no cut beyond :attr:`remaining`).
    """

    remaining: int
    limit: int | None = None

    def take(self, proposed: int) -> int:
        """How many of ``proposed`` new candidates the round may measure (and spend them)."""
        n = max(0, min(proposed, self.remaining,
                       proposed if self.limit is None else self.limit))
        self.remaining -= n
        return n


def round_size(budget_left: int, trials_per_round: int, first_pass_left: int,
               first_round: int | None = None) -> int:
    """The size of the next round.

    Args:
        budget_left: Trials left in the run.
        trials_per_round: The configured round size.
        first_pass_left: Tasks (this one included) still waiting for their first round of
            this run; 0 once every task had one.
        first_round: The size of a first-pass round (``None``: ``trials_per_round``).

    Returns:
        ``min(trials_per_round, budget_left)``, and during the first pass at most
        ``first_round`` and an even share of ``budget_left`` (at least 1), so that every
        task gets a round.
    """
    size = min(trials_per_round, budget_left)
    if first_pass_left > 0:
        size = min(size, first_round or size, max(1, budget_left // first_pass_left))
    return max(0, size)


@derived_object
class EagerGradientScheduler(PyTaskScheduler):
    """Round-by-round gradient task scheduler.

    Args:
        alpha: Weight of the observed (backward) gradient against the optimistic
            forward estimate.
        window: Rounds over which the backward gradient is measured.
        budget: The run's :class:`RoundBudget`, shared with the tasks' searches
            (``None``: rounds are as large as the searches make them).
        trials_per_round: The configured round size (used with ``budget``).
        task_left: Trials each task may still measure in this run (``trials_per_task``
            less the task's measurements already in the database, so that a resumed run
            tops each task up to its share and no further); a task at 0 gets no round,
            and a round is cut to its task's share (used with ``budget``). ``None``: no
            cap per task.
        first_round: The size of a task's first round in this run (``None``:
            ``trials_per_round``, and no task skips the first pass).
        known: Per task, ``(measured trials, best seconds or None)`` already in the
            database; with ``first_round``, a task with at least ``first_round`` of them
            skips the first pass, its best seeding its gradient.
    """

    def __init__(self, alpha: float = 0.2, window: int = 3, budget: RoundBudget | None = None,
                 trials_per_round: int = 16, task_left: list[int] | None = None,
                 first_round: int | None = None,
                 known: list[tuple[int, float | None]] | None = None) -> None:
        super().__init__()
        self.alpha = float(alpha)
        self.window = int(window)
        self.budget = budget
        self.trials_per_round = int(trials_per_round)
        self.task_left = None if task_left is None else [int(n) for n in task_left]
        self.history: dict[int, list[float]] = {}  # task -> best seconds after each round
        self.rounds: dict[int, int] = {}
        self.first_pass = 0
        self.first_round = None if first_round is None else max(1, int(first_round))
        self.looked: set[int] = set()  # tasks that skip the first pass
        if self.first_round is not None:
            for i, (trials, best) in enumerate(known or []):
                if trials >= self.first_round:
                    self.looked.add(i)
                    self.history[i] = [math.inf if best is None else float(best)]
                    self.rounds[i] = max(1, math.ceil(trials / self.trials_per_round))

    def _record(self, task_id: int, results) -> None:
        """Remember the best latency of ``task_id`` after a joined round."""
        secs = [s for s in (measured_seconds(r.run_secs, r.error_msg) for r in results)
                if s is not None]
        if self.task_left is not None:
            self.task_left[task_id] -= len(results)
        hist = self.history.setdefault(task_id, [])
        best = min([*secs, *hist[-1:]]) if (secs or hist) else math.inf
        hist.append(best)
        self.rounds[task_id] = self.rounds.get(task_id, 0) + 1

    def _score(self, task_id: int, weight: float) -> float:
        hist = self.history.get(task_id, [])
        if not hist:
            return math.inf  # never measured: its first round comes first
        if not math.isfinite(hist[-1]):
            return 0.0  # measured, nothing valid so far: every improving task goes first
        best = hist[-1]
        back = 0.0
        if len(hist) > 1:
            w = min(self.window, len(hist) - 1)
            back = (hist[-1 - w] - best) / w
        forward = best / max(1, self.rounds.get(task_id, 1))
        return weight * (self.alpha * back + (1 - self.alpha) * forward)

    def next_task_id(self) -> int:
        tasks = self._outer().tasks_  # the TVM object this Python instance backs
        for i, task in enumerate(tasks):
            if task.runner_futures is not None:
                # Not overridden: joining through the base class commits the results to
                # the database and runs the measure callbacks.
                self._record(i, self.join_running_task(i))
        alive = [i for i, t in enumerate(tasks) if not t.is_terminated and self._open(i)]
        if not alive or (self.budget is not None and self.budget.remaining <= 0):
            return -1
        while self.first_pass < len(tasks):
            i = self.first_pass
            self.first_pass += 1
            if i in alive and i not in self.looked:
                return self._sized(i, sum(j >= i and j not in self.looked for j in alive))
        best = max(alive, key=lambda i: self._score(i, float(tasks[i].task_weight)))
        return self._sized(best, 0)

    def _open(self, task_id: int) -> bool:
        """Whether ``task_id`` may still measure (its cap, if any, is not reached)."""
        return self.task_left is None or self.task_left[task_id] > 0

    def _sized(self, task_id: int, first_pass_left: int) -> int:
        """Set the next round's size in the shared budget; return ``task_id``."""
        if self.budget is not None:
            size = round_size(self.budget.remaining, self.trials_per_round, first_pass_left,
                              self.first_round)
            if self.task_left is not None:
                size = min(size, self.task_left[task_id])
            self.budget.limit = size
        return task_id
