"""Allocation rule of the round-by-round scheduler (scores only; tuning is tested end to end)."""

from __future__ import annotations

import math

from tuner.engine.scheduler import EagerGradientScheduler


def _scheduler(history: dict[int, list[float]]) -> EagerGradientScheduler:
    sched = EagerGradientScheduler()
    inner = sched._inst if hasattr(sched, "_inst") else sched
    inner.history = {k: list(v) for k, v in history.items()}
    inner.rounds = {k: len(v) for k, v in history.items()}
    return inner


def test_unmeasured_first_failing_last_and_weight_matters():
    s = _scheduler({0: [0.004, 0.003], 1: [math.inf], 2: [0.004, 0.003]})
    assert s._score(3, 1.0) == math.inf  # never measured
    assert s._score(1, 1.0) == 0.0  # measured, nothing valid
    assert s._score(2, 2.0) == 2 * s._score(0, 1.0) > 0  # twice the weight, twice the score


def test_improving_task_scores_higher():
    s = _scheduler({0: [0.004, 0.004, 0.004, 0.004], 1: [0.008, 0.006, 0.005, 0.004]})
    assert s._score(1, 1.0) > s._score(0, 1.0)
