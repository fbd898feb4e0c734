"""Per-round timings (search, measurement, model update), the model's accuracy on each
new batch before it was measured (paper Figure 9 and Table 4), and how far each batch
lies from what the task had measured (the search's exploration, in knob space).

A round of :class:`tuner.engine.scheduler.EagerGradientScheduler` is: the search strategy proposes
a batch (``search``), the builder and runner measure it (``measure``), then the measure
callbacks commit it and update the cost model (``update``). :class:`RoundClock` is told
when the search starts and ends (by :class:`tuner.engine.norepeat.NoRepeatSearch`);
:class:`BatchAccuracyCallback`, the first measure callback, closes the measurement and
scores the cost model's predictions of the batch (the model has not seen it yet);
:class:`RoundMonitor`, called after the cost model's update, closes the round and writes
``rounds.jsonl`` and TensorBoard scalars.
"""

from __future__ import annotations

import json
import logging
import os
import time

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from metatune import metrics
from metatune.records import measured_seconds

logger = logging.getLogger(__name__)
ROUNDS_FILE = "rounds.jsonl"


def batch_exploration(batch: np.ndarray, before: np.ndarray) -> dict[str, float]:
    """How far a measured batch lies from what the task had measured, in knob space.

    Args:
        batch: Knob vectors of the batch (:class:`tuner.search.knobs.KnobSpace`), ``b x d``.
        before: Knob vectors of the task's earlier measurements, ``n x d``.

    Returns:
        ``spread``: the mean distance between two candidates of the batch (``b >= 2``);
        ``novelty``: the mean distance from a batch candidate to its nearest earlier
        measurement (``n >= 1``): small when the search stays where it has measured.
    """
    out: dict[str, float] = {}
    if len(batch) >= 2:
        d = np.linalg.norm(batch[:, None, :] - batch[None, :, :], axis=-1)
        out["spread"] = float(d[np.triu_indices(len(batch), 1)].mean())
    if len(batch) and len(before):
        d = np.linalg.norm(batch[:, None, :] - before[None, :, :], axis=-1)
        out["novelty"] = float(d.min(axis=1).mean())
    return out


class RoundClock:
    """Timestamps of the current round, shared by the search, callbacks and monitor."""

    def __init__(self) -> None:
        self.search_start = self.search_end = self.measured = None
        self.search_seconds = 0.0
        self.accuracy: dict[str, float] = {}
        self.accuracy_seconds = 0.0

    def start_search(self) -> None:
        """The search strategy starts proposing a batch."""
        self.search_start = time.perf_counter()

    def end_search(self) -> None:
        """The batch is proposed; building and running start."""
        self.search_end = time.perf_counter()
        if self.search_start is not None:
            self.search_seconds += self.search_end - self.search_start


def batch_accuracy(pred: np.ndarray, seconds: list[float], best: float) -> dict[str, float]:
    """Accuracy of predictions of one measured batch.

    Args:
        pred: Predicted scores of the valid candidates (higher is better).
        seconds: Their measured run times.
        best: The task's best run time so far, this batch included.

    Returns:
        ``mse``, ``mse_d`` (top 25 %) and ``pairwise`` against ``best / seconds``.
    """
    target = best / np.asarray(seconds, dtype=float)
    return {"mse": metrics.mse(pred, target), "mse_d": metrics.mse_top(pred, target),
            "pairwise": metrics.pairwise_accuracy(pred, target)}


@derived_object
class BatchAccuracyCallback(PyMeasureCallback):
    """First measure callback: ends the measurement, scores the model on the batch.

    Args:
        clock: The shared :class:`RoundClock`.
        cost_model: The tuning's cost model (scored before its update), or ``None``.
        best_seconds: Best run time per task so far (shared, updated here).
    """

    def __init__(self, clock: RoundClock, cost_model, best_seconds: list[float | None]) -> None:
        super().__init__()
        self.clock = clock
        self.cost_model = cost_model
        self.best = best_seconds
        self.knobs: dict[int, tuple] = {}  # task -> (KnobSpace, knob vectors measured)

    def _exploration(self, task_id: int, measure_candidates) -> dict[str, float]:
        """:func:`batch_exploration` of this batch against the task's earlier batches in
        this run (then the batch joins them)."""
        from tuner.search.knobs import KnobSpace

        space, before = self.knobs.get(task_id) or (KnobSpace(), [])
        batch = space.matrix(list(measure_candidates))  # every vector has space.dim
        out = batch_exploration(batch, np.concatenate([np.zeros((0, space.dim)), *before]))
        self.knobs[task_id] = (space, [*before, batch])
        return out

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
              runner_results) -> None:
        self.clock.measured = time.perf_counter()
        start = self.clock.measured
        secs = [measured_seconds(r.run_secs, r.error_msg) for r in runner_results]
        valid = [i for i, s in enumerate(secs) if s is not None]
        self.clock.accuracy = {}
        if self.cost_model is not None and len(valid) >= 2:
            best = min([secs[i] for i in valid] + [b for b in self.best[task_id:task_id + 1]
                                                   if b is not None])
            ctx = task_scheduler.tasks_[task_id].ctx
            try:
                pred = np.asarray(self.cost_model.predict(
                    ctx, [measure_candidates[i] for i in valid]), dtype=float)
                self.clock.accuracy = batch_accuracy(pred, [secs[i] for i in valid], best)
            except Exception as err:  # accuracy is a report, never a reason to stop tuning
                logger.debug("batch accuracy skipped: %s", err)
        try:
            self.clock.accuracy.update(self._exploration(task_id, measure_candidates))
        except Exception as err:  # a report too
            logger.debug("batch exploration skipped: %s", err)
        self.clock.accuracy_seconds = time.perf_counter() - start


class RoundMonitor:
    """Closes each round: ``rounds.jsonl``, TensorBoard, and totals for the report.

    Use it through :class:`tuner.app.monitor.MonitorCallback` (after the cost-model update).

    Args:
        clock: The shared :class:`RoundClock`.
        task_names: Task names.
        work_dir: Where ``rounds.jsonl`` is appended.
        writer: TensorBoard ``SummaryWriter`` or ``None``.
        trials_before: Trials already in the database (x-axis offset).
    """

    def __init__(self, clock: RoundClock, task_names: list[str], work_dir: str, writer=None,
                 trials_before: int = 0) -> None:
        self.clock = clock
        self.task_names = list(task_names)
        self.path = os.path.join(work_dir, ROUNDS_FILE)
        self.writer = writer
        self.trials = int(trials_before)
        self.rows: list[dict] = []

    def observe(self, task_id: int, builder_results, runner_results) -> None:
        """Record the round that just ended."""
        now = time.perf_counter()
        c = self.clock
        measured = c.measured or now
        row = {
            "task_id": task_id, "task": self.task_names[task_id], "batch": len(runner_results),
            "search_s": round(c.search_seconds, 4),
            "measure_s": round(measured - c.search_end, 4) if c.search_end else None,
            "update_s": round(now - measured - c.accuracy_seconds, 4),
            **{k: (None if v != v else round(v, 5)) for k, v in c.accuracy.items()},
        }
        c.search_seconds = 0.0
        self.trials += len(runner_results)
        row["trial"] = self.trials
        self.rows.append(row)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        if self.writer is not None:
            for key in ("search_s", "measure_s", "update_s"):
                if row[key] is not None:
                    self.writer.add_scalar(f"round/{key}", row[key], self.trials)
            for key in ("mse", "mse_d", "pairwise"):
                if row.get(key) is not None:
                    self.writer.add_scalar(f"accuracy/{key}", row[key], self.trials)
            for key in ("novelty", "spread"):
                if row.get(key) is not None:
                    self.writer.add_scalar(f"exploration/{key}", row[key], self.trials)

    def summary(self) -> dict:
        """Totals and medians over this run's rounds (for ``report.json``)."""
        if not self.rows:
            return {"rounds": 0}
        out: dict = {"rounds": len(self.rows)}
        for key in ("search_s", "measure_s", "update_s"):
            vals = [r[key] for r in self.rows if r[key] is not None]
            out[key.replace("_s", "_seconds")] = round(sum(vals), 2)
        overhead = [(r["search_s"] + r["update_s"]) / r["measure_s"] for r in self.rows
                    if r["measure_s"]]
        out["median_overhead_ratio"] = round(float(np.median(overhead)), 4) if overhead else None
        for key in ("mse", "mse_d", "pairwise"):
            vals = [r[key] for r in self.rows if r.get(key) is not None]
            out[f"median_{key}"] = round(float(np.median(vals)), 5) if vals else None
        return out
