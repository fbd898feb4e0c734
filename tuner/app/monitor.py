"""Measure callbacks: progress, curves, TensorBoard, and detection of rounds that measure
nothing."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import Counter
from collections.abc import Callable

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from metatune.errors import TuningStalledError
from metatune.records import measured_seconds

logger = logging.getLogger(__name__)

CURVE_FILE = "curves.jsonl"


def error_summary(message: str) -> str:
    """The informative line of a builder/runner error message (at most 200 characters)."""
    lines = [ln.strip() for ln in str(message).splitlines() if ln.strip()]
    # TVM errors put the useful line last; builder/runner prefixes come first.
    return (lines[-1] if lines else "unknown error")[:200]


class FailureMonitor:
    """Warns about every failed measurement and stops tuning that cannot progress.

    Use it through :class:`MonitorCallback`.

    A round whose candidates all fail is reported with its most common error. After
    ``max_failed_rounds`` such rounds in a row (over all tasks), the callback records a
    :class:`TuningStalledError` and raises it to stop the task scheduler (the error crosses
    TVM's FFI, so callers re-raise :attr:`stalled`); everything
    measured before stays in the database.

    Args:
        max_failed_rounds: Consecutive all-failed rounds tolerated.
        task_names: Names of the tasks, for messages.
    """

    def __init__(self, *, max_failed_rounds: int, task_names: list[str]) -> None:
        self.max_failed_rounds = int(max_failed_rounds)
        self.task_names = list(task_names)
        self.failed_in_a_row = 0
        self.failures = 0
        self.measured = 0
        self.errors: Counter = Counter()
        self.stalled: TuningStalledError | None = None

    def observe(self, task_id: int, builder_results, runner_results) -> None:
        """Account one measured batch of task ``task_id``.

        Raises:
            TuningStalledError: ``max_failed_rounds`` batches in a row had no valid result.
        """
        round_errors: Counter = Counter()
        for build, run in zip(builder_results, runner_results, strict=True):
            if build.error_msg:
                round_errors["build: " + error_summary(build.error_msg)] += 1
            elif measured_seconds(run.run_secs, run.error_msg) is None:
                round_errors["run: " + error_summary(run.error_msg or "no run time")] += 1
        n = len(runner_results)
        self.measured += n
        self.failures += sum(round_errors.values())
        self.errors.update(round_errors)
        name = self.task_names[task_id]
        if round_errors:
            common, count = round_errors.most_common(1)[0]
            logger.warning("task %d (%s): %d of %d candidates failed; most common (%dx): %s",
                           task_id, name, sum(round_errors.values()), n, count, common)
        if n and sum(round_errors.values()) == n:
            self.failed_in_a_row += 1
            if self.failed_in_a_row >= self.max_failed_rounds:
                common = self.errors.most_common(1)[0][0]
                self.stalled = TuningStalledError(
                    f"{self.failed_in_a_row} rounds in a row measured nothing valid (last task "
                    f"{name}); most common error: {common}. Raise builder.timeout_sec / "
                    "runner.timeout_sec if these are timeouts, or check the target; "
                    "measurements made so far are saved in the work dir"
                )
                raise self.stalled
        else:
            self.failed_in_a_row = 0


class ProgressMonitor:
    """Progress bar, ``curves.jsonl`` and TensorBoard scalars after every measured batch.

    Use it through :class:`MonitorCallback`.

    Args:
        task_names: Task names.
        task_weights: How often the network calls each task.
        best_seconds: Best run time per task already in the database (``None`` if none).
        budget: Trials this run may measure.
        work_dir: Where ``curves.jsonl`` is appended.
        trials_before: Trials already in the database (resume), to continue the x-axis.
        writer: A TensorBoard ``SummaryWriter`` or ``None``.
        show_bar: Whether to draw a tqdm progress bar.
    """

    def __init__(self, *, task_names: list[str], task_weights: list[float],
                 best_seconds: list[float | None], budget: int, work_dir: str,
                 trials_before: int = 0, writer=None, show_bar: bool = True) -> None:
        from tqdm.auto import tqdm

        self.task_names = list(task_names)
        self.task_weights = list(task_weights)
        self.best = list(best_seconds)
        self.trials_before = int(trials_before)
        self.done = 0
        self.per_task = [0] * len(self.task_names)
        self.writer = writer
        self.curve_path = os.path.join(work_dir, CURVE_FILE)
        self.start = time.perf_counter()
        self.bar = tqdm(total=budget, unit="trial", desc="tuning", disable=not show_bar,
                        dynamic_ncols=True)

    def estimated_network_seconds(self) -> float | None:
        """Sum over tasks of weight x best run time; ``None`` until every task has one."""
        if any(b is None for b in self.best):
            return None
        return sum(w * b for w, b in zip(self.task_weights, self.best, strict=True))

    def observe(self, task_id: int, builder_results, runner_results) -> None:
        """Account one measured batch: best so far, curves, TensorBoard, progress bar."""
        now = time.perf_counter()
        valid = [s for s in (measured_seconds(r.run_secs, r.error_msg) for r in runner_results)
                 if s is not None]
        if valid and (self.best[task_id] is None or min(valid) < self.best[task_id]):
            self.best[task_id] = min(valid)
        self.done += len(runner_results)
        self.per_task[task_id] += len(runner_results)
        step = self.trials_before + self.done
        network = self.estimated_network_seconds()
        entry = {
            "trial": step, "task_id": task_id, "task": self.task_names[task_id],
            "batch": len(runner_results), "valid": len(valid),
            "batch_best_ms": min(valid) * 1e3 if valid else None,
            "task_best_ms": self.best[task_id] * 1e3 if self.best[task_id] else None,
            "network_estimate_ms": network * 1e3 if network else None,
            "measured_tasks": sum(b is not None for b in self.best),
            "measured_tasks_ms": 1e3 * sum(w * b for w, b in zip(self.task_weights, self.best,
                                                                     strict=True)
                                           if b is not None),
            "elapsed_s": now - self.start,
        }
        with open(self.curve_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        if self.writer is not None:
            if self.best[task_id] is not None:
                self.writer.add_scalar(
                    f"task_best_ms/{task_id:02d}_{self.task_names[task_id]}",
                    self.best[task_id] * 1e3, step)
            if network is not None:
                self.writer.add_scalar("network/estimated_ms", network * 1e3, step)
            self.writer.add_scalar("tuning/valid_fraction",
                                   len(valid) / max(1, len(runner_results)), step)
            self.writer.flush()
        best = self.best[task_id]
        text = f"task {task_id} best {best * 1e3:.3f} ms" if best else f"task {task_id} no valid"
        if network:
            text += f", net~{network * 1e3:.1f} ms"
        self.bar.set_postfix_str(text, refresh=False)
        self.bar.update(len(runner_results))

    def close(self) -> None:
        """Close the progress bar."""
        self.bar.close()


@derived_object
class MonitorCallback(PyMeasureCallback):
    """Adapts monitors (objects with ``observe(task_id, builder_results, runner_results)``)
    to a MetaSchedule measure callback, called after every measured batch.

    Args:
        monitors: The monitors, called in order.
    """

    def __init__(self, monitors: list) -> None:
        super().__init__()
        self.monitors = list(monitors)

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
              runner_results) -> None:
        for monitor in self.monitors:
            monitor.observe(task_id, builder_results, runner_results)


@derived_object
class ErrorLogCallback(PyMeasureCallback):
    """Append each failed build or run of one workload to a JSON-lines file, and count the
    valid ones.

    Args:
        path: The file (one ``{"workload", "stage", "error"}`` object per line).
        workload: The workload's name.
        on_valid: Called with the number of valid measurements of each batch.
    """

    def __init__(self, *, path: str, workload: str, on_valid: Callable[[int], object]) -> None:
        self.path = path
        self.workload = workload
        self.on_valid = on_valid

    def apply(self, task_scheduler, task_id, candidates, builds, runs) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            for b, r in zip(builds, runs, strict=True):
                if b.error_msg or r.error_msg:
                    stage = "build" if b.error_msg else "run"
                    f.write(json.dumps({"workload": self.workload, "stage": stage,
                                        "error": error_summary(b.error_msg or r.error_msg)})
                            + "\n")
        self.on_valid(sum(not (b.error_msg or r.error_msg)
                          for b, r in zip(builds, runs, strict=True)))


def read_curves(work_dir: str) -> list[dict]:
    """Read ``curves.jsonl`` of a work dir, skipping unreadable lines."""
    path = os.path.join(work_dir, CURVE_FILE)
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def finite_or_none(value: float | None) -> float | None:
    """``value`` if it is a finite number, else ``None`` (for JSON reports)."""
    return value if value is not None and math.isfinite(value) else None
