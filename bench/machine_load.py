"""How much of the machine other processes took while a benchmark step ran.

A tuning run's wall time is only comparable with another's when neither shared the cores:
on a 2-core machine a test suite running beside a rung inflated MetaSchedule's
evolutionary search from 6.5 to 18-32 s a round (2026-12-07, regnet_y_400mf, xgb). The
:class:`LoadMeter` samples ``/proc`` every few seconds in a background thread and sums the
CPU time of every process that is not the benchmark or one of its descendants; the rung's
record keeps the total, so the page can mark the rungs whose time is not clean.

Linux only; elsewhere the meter records nothing (``None``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Clock ticks per second of ``/proc/<pid>/stat``'s CPU times.
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: A step whose foreign CPU share exceeds this is marked as measured under load.
LOADED_SHARE = 0.10


def _processes() -> dict[int, tuple[int, float]]:
    """Every process's parent pid and CPU seconds (user + system), from ``/proc``."""
    out: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                text = f.read()
        except OSError:  # gone between listdir and open
            continue
        # the command name (field 2) may hold spaces and parentheses: split after its ')'
        fields = text[text.rfind(")") + 2:].split()
        out[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS)
    return out


def _descendants(root: int, procs: dict[int, tuple[int, float]]) -> set[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(children.get(pid, []))
    return out


class LoadMeter:
    """Sums other processes' CPU time while it runs (a context manager).

    Args:
        interval: Seconds between samples of ``/proc``. A process that starts and ends
            between two samples is missed; one that lives longer counts from its first
            sample on.

    Attributes:
        result: After the ``with`` block: ``{"foreign_cpu_seconds", "wall_seconds",
            "cores", "foreign_share", "loaded", "load_average"}`` (``foreign_share``: the
            foreign CPU seconds over wall x cores; ``loaded``: above :data:`LOADED_SHARE`;
            ``load_average``: the 1-minute load average at the end), or ``None`` where
            ``/proc`` cannot be read.
    """

    def __init__(self, interval: float = 2.0) -> None:
        self.interval = interval
        self.result: dict | None = None
        self._stop = threading.Event()
        self._seen: dict[int, float] = {}  # foreign pid -> CPU seconds at its last sample
        self._foreign = 0.0
        self._thread: threading.Thread | None = None
        self._ok = os.path.isdir("/proc") and os.path.exists(f"/proc/{os.getpid()}/stat")

    def _sample(self) -> None:
        procs = _processes()
        ours = _descendants(os.getpid(), procs)
        for pid, (_, cpu) in procs.items():
            if pid in ours:
                continue
            before = self._seen.get(pid)
            if before is not None and cpu >= before:
                self._foreign += cpu - before
            self._seen[pid] = cpu

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._sample()
            except (OSError, ValueError, IndexError):  # a malformed or vanished entry
                continue

    def __enter__(self) -> LoadMeter:
        self._start = time.monotonic()
        if self._ok:
            self._sample()
            self._thread = threading.Thread(target=self._run, name="load-meter", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if not self._ok:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        wall = time.monotonic() - self._start
        cores = os.cpu_count() or 1
        share = self._foreign / (wall * cores) if wall > 0 else 0.0
        self.result = {"foreign_cpu_seconds": round(self._foreign, 1),
                       "wall_seconds": round(wall, 1), "cores": cores,
                       "foreign_share": round(share, 3), "loaded": share > LOADED_SHARE,
                       "load_average": round(os.getloadavg()[0], 2)}


def wait_until_quiet(max_wait_s: float, share: float = LOADED_SHARE, window_s: float = 5.0,
                     log=print) -> dict | None:
    """Wait until other processes take at most ``share`` of the cores over ``window_s``
    seconds, for at most ``max_wait_s`` seconds: a timing taken beside another job measures
    the other job too (the same builds timed 1.5 ms quiet and 3.7-7.0 ms beside a test run,
    2026-12-07).

    Returns:
        The :class:`LoadMeter` result of the last window (``loaded`` tells whether the wait
        ended quiet), or ``None`` where ``/proc`` cannot be read.
    """
    deadline = time.monotonic() + max_wait_s
    told = False
    while True:
        with LoadMeter(interval=1.0) as meter:
            time.sleep(window_s)
        result = meter.result
        if result is None or result["foreign_share"] <= share:
            return result
        if time.monotonic() + window_s > deadline:
            log(f"the machine is still busy ({result['foreign_share']:.0%} of the cores "
                f"taken by other processes) after {max_wait_s:.0f} s: timing anyway, "
                "marked as loaded")
            return result
        if not told:
            log(f"waiting for the machine to be quiet: other processes take "
                f"{result['foreign_share']:.0%} of the cores (at most {max_wait_s:.0f} s)")
            told = True


@contextmanager
def quiet_timing(max_wait_s: float, interval: float = 1.0, log=print) -> Iterator[dict]:
    """Wait for a quiet machine (:func:`wait_until_quiet`), then meter the other processes
    while the block times something: how every timing here is taken.

    Yields:
        A dict with ``machine_load_before`` (the last waiting window's meter result) at
        once and ``machine_load`` (the block's :class:`LoadMeter` result) on exit: the two
        keys a timing record keeps.
    """
    loads = {"machine_load_before": wait_until_quiet(max_wait_s, log=log)}
    with LoadMeter(interval=interval) as meter:
        yield loads
    loads["machine_load"] = meter.result
