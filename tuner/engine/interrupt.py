"""Ctrl-C while TVM's C++ task scheduler runs: remember it, so it is never swallowed.

A ``KeyboardInterrupt`` raised in Python code that TVM's C++ called (a builder, a
callback) crosses the FFI as a ``RuntimeError`` and may be caught on the way. While
:class:`InterruptWatch` is active, SIGINT also sets :attr:`InterruptWatch.seen`; the
tuning loop turns any error (or the next round) into a plain ``KeyboardInterrupt`` once it
is set, and the entry point prints the one-line 'interrupted; rerun to resume'.
"""

from __future__ import annotations

import signal
import threading


class InterruptWatch:
    """Context manager: SIGINT raises ``KeyboardInterrupt`` as usual and sets :attr:`seen`.

    Use it through :class:`tuner.app.monitor.MonitorCallback` too: :meth:`observe` raises
    ``KeyboardInterrupt`` after a round if Ctrl-C was pressed during it.
    """

    def __init__(self) -> None:
        self.seen = False
        self._previous = None

    def _handler(self, signum, frame) -> None:
        self.seen = True
        raise KeyboardInterrupt

    def __enter__(self) -> InterruptWatch:
        # A run started with SIGINT ignored (nohup, a background job) keeps ignoring it.
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN):
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def observe(self, task_id: int, builder_results, runner_results) -> None:
        """Stop after the round in which Ctrl-C was pressed (its records are committed)."""
        if self.seen:
            raise KeyboardInterrupt
