"""Several runtimes timed side by side, in alternating rounds.

Timings taken minutes apart on a shared machine disagree by up to 30 % (clock, neighbours,
thermal state), so a tuned network timed first and PyTorch timed a minute later compare
badly. Here every runtime is timed in each of several rounds, the order alternating
(A B C, C B A, A B C, ...), and each reports the median of all its windows: what drifts
over the run falls on all of them alike.

Every runtime is timed the same way: a *window* runs the model back to back for at least
``min_window_ms`` and counts its mean time per call (what TVM's ``time_evaluator`` does
with ``min_repeat_ms``), and each turn starts with one untimed call (as the time
evaluator's does), so no runtime's first window pays for the switch.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

#: ``(windows, min_window_ms) -> the mean ms per call of each window``.
WindowTimer = Callable[[int, float], list[float]]


@dataclass
class Latency:
    """A latency measurement.

    Attributes:
        median_ms: Median over the windows (repeats), in milliseconds.
        runs_ms: Every window's mean time per call, in milliseconds, in timing order.
    """

    median_ms: float
    runs_ms: list[float]


def torch_timer(module, x: np.ndarray, num_threads: int, compile: bool = False,
                warmup: int = 3) -> WindowTimer:
    """A window timer of a PyTorch module on the CPU, warmed up (and compiled) now.

    Args:
        module: The ``nn.Module`` in eval mode.
        x: The input array.
        num_threads: ``torch.set_num_threads`` value, set now and before every window.
        compile: Time ``torch.compile(module)`` (inductor) instead of eager; it compiles
            during the warm-up runs.
        warmup: Untimed runs before the first window.
    """
    import torch

    torch.set_num_threads(num_threads)
    if compile:
        module = torch.compile(module)
    inp = torch.from_numpy(x)
    with torch.inference_mode():
        for _ in range(warmup):
            module(inp)

    def windows(count: int, min_window_ms: float) -> list[float]:
        torch.set_num_threads(num_threads)  # another timer may have changed it
        with torch.inference_mode():
            return time_windows(lambda: module(inp), count, min_window_ms)

    return windows


def time_windows(call: Callable[[], Any], count: int, min_window_ms: float) -> list[float]:
    """``count`` windows of ``call`` (one inference), after one untimed call: each window
    calls it back to back for at least ``min_window_ms``.

    Returns:
        Each window's mean milliseconds per call.
    """
    call()  # untimed: caches and threads warm again after the other runtimes
    out = []
    for _ in range(count):
        calls, start = 0, time.perf_counter()
        while True:
            call()
            calls += 1
            elapsed = (time.perf_counter() - start) * 1e3
            if elapsed >= min_window_ms:
                break
        out.append(elapsed / calls)
    return out


def window_timer(call: Callable[[], Any]) -> WindowTimer:
    """A window timer of ``call`` (one inference), as :func:`time_windows` times it."""
    return lambda count, min_window_ms: time_windows(call, count, min_window_ms)


def interleaved(timers: Mapping[str, WindowTimer], windows: int, min_window_ms: float,
                rounds: int, settle_s: float = 0.2) -> dict[str, Latency]:
    """Time every runtime in ``rounds`` alternating rounds.

    Args:
        timers: Name -> window timer (:func:`torch_timer`,
            :meth:`tuner.engine.evaluate.CompiledNetwork.timer`).
        windows: Windows per runtime in all, spread over the rounds: ``ceil(windows /
            rounds)`` a round, so ``rounds`` times that in all.
        min_window_ms: Each window's minimum length.
        rounds: Rounds; the order of the runtimes reverses from one round to the next.
        settle_s: A pause before each runtime's turn, so that the threads of the one
            before (OpenMP's, TVM's pool) stop spinning and leave the cores free.

    Returns:
        Name -> :class:`Latency` over all of that runtime's windows.
    """
    if rounds < 1 or windows < 1:
        raise ValueError(f"rounds ({rounds}) and windows ({windows}) must be at least 1")
    per_round = math.ceil(windows / rounds)
    names = list(timers)
    runs: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            time.sleep(settle_s)
            runs[name] += timers[name](per_round, min_window_ms)
    return {n: Latency(statistics.median(v), v) for n, v in runs.items()}
