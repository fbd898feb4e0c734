"""A task scheduler that commits every round at once and allocates trials by gradient.

MetaSchedule's ``gradient`` scheduler sends the first round of *every* task before it
joins any: for resnet-18 (19 tasks, 16 trials a round) nothing reaches the database
until 304 trials were spent, so an interrupted run loses everything and the progress
bar stands still. Its runner also measures one task while the next task's search keeps
both cores busy. This scheduler joins each round before choosing the next task (results
are committed and reported immediately; measurements run on an otherwise idle machine),
then allocates like Ansor/MetaSchedule's gradient scheduler: first one round per task,
heaviest first, then the task whose weighted latency is expected to drop the most.
"""

from __future__ import annotations

import math

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.task_scheduler import PyTaskScheduler

from metatune.records import measured_seconds


@derived_object
class EagerGradientScheduler(PyTaskScheduler):
    """Round-by-round gradient task scheduler.

    Args:
        alpha: Weight of the observed (backward) gradient against the optimistic
            forward estimate.
        window: Rounds over which the backward gradient is measured.
    """

    def __init__(self, alpha: float = 0.2, window: int = 3) -> None:
        super().__init__()
        self.alpha = float(alpha)
        self.window = int(window)
        self.history: dict[int, list[float]] = {}  # task -> best seconds after each round
        self.rounds: dict[int, int] = {}
        self.first_pass = 0

    def _record(self, task_id: int, results) -> None:
        """Remember the best latency of ``task_id`` after a joined round."""
        secs = [s for s in (measured_seconds(r.run_secs, r.error_msg) for r in results)
                if s is not None]
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
        alive = [i for i, t in enumerate(tasks) if not t.is_terminated]
        if not alive:
            return -1
        while self.first_pass < len(tasks):
            i = self.first_pass
            self.first_pass += 1
            if not tasks[i].is_terminated:
                return i
        return max(alive, key=lambda i: self._score(i, float(tasks[i].task_weight)))
