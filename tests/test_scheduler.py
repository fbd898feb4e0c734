"""Allocation rule of the round-by-round scheduler (scores only; tuning is tested end to end)."""

from __future__ import annotations

import math
from types import SimpleNamespace

from tuner.engine.scheduler import EagerGradientScheduler, RoundBudget


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


def _inner(sched: EagerGradientScheduler) -> EagerGradientScheduler:
    return sched._inst if hasattr(sched, "_inst") else sched


def test_first_round_looks_at_new_tasks_and_resumed_ones_go_by_gradient():
    # task 0 measured 8 times (best 1 ms), task 2 twice; tasks 1 and 3 never
    budget = RoundBudget(100)
    sched = _inner(EagerGradientScheduler(budget=budget, trials_per_round=16, first_round=4,
                                          known=[(8, 1e-3), (0, None), (2, 2e-3), (0, None)]))
    tasks = [SimpleNamespace(runner_futures=None, is_terminated=False, task_weight=1.0)
             for _ in range(4)]
    sched._outer = lambda: SimpleNamespace(tasks_=tasks)
    assert sched.history == {0: [1e-3]} and sched.rounds == {0: 1}
    firsts = []
    for _ in range(3):  # the first pass: tasks 1, 2, 3 (task 0 was looked at before)
        firsts.append(sched.next_task_id())
        assert budget.limit == 4
        sched._record(firsts[-1], [])
    assert firsts == [1, 2, 3]
    sched.history.update({1: [5e-3], 2: [2e-3], 3: [1e-4]})
    assert sched.next_task_id() == 1 and budget.limit == 16  # the slowest, a full round


def test_without_first_round_every_task_gets_a_full_first_round():
    sched = _inner(EagerGradientScheduler(budget=RoundBudget(1000), trials_per_round=16,
                                          known=[(40, 1e-3), (0, None)]))
    assert sched.history == {} and sched.looked == set()  # the default: as before
