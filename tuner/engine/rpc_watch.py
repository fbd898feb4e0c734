"""MetaSchedule's ``RPCRunner``, watched: a tracker or server that goes away stops tuning in
one line, and never turns a candidate into a failed measurement.

Unwatched, a tracker killed mid-run cost three minutes of TVM's retry warnings and thread
tracebacks from the runner's workers, and the candidates in flight were recorded as failed
measurements (run time 1e10): counted in the budget, never proposed again.
:class:`WatchedRPCRunner` asks the tracker (:func:`tuner.engine.rpc.check_tracker`, a short
query) before each batch and every :data:`CHECK_EVERY_SEC` seconds while it waits for one:

- the tracker does not answer, or no server is left under the key: the runner's workers
  are killed and :class:`~metatune.errors.RunnerUnavailableError` stops tuning. It is
  raised while the scheduler collects the batch's results, so the batch is never committed;
- a candidate's session failed while a server left the farm (fewer servers than before):
  it is measured again on the servers that are left (at most :data:`RERUNS` times), with
  one warning line saying how many are left.

A failure while the farm is whole is the candidate's own and is returned as MetaSchedule
would (a failed measurement). An error the server itself sends back (TVM's RPC says
:data:`SERVER_ERROR`) is the candidate's own at once: the server answered. Only a failed
session (a connection reset, a session shut down, a timeout) with no server known to be
lost waits :data:`GRACE_SEC` for the tracker to see a death before it is called the
candidate's own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture, RunnerResult

from metatune.errors import RunnerUnavailableError, one_line, register_ffi_errors
from tuner.engine.rpc import START_SERVER, START_TRACKER, RPCSettings, check_tracker

logger = logging.getLogger(__name__)

#: Seconds between two checks of the tracker while a batch is measured.
CHECK_EVERY_SEC = 5.0
#: Times a candidate whose server went away is measured again on the others.
RERUNS = 2
#: In a failure's message: the server ran the candidate and sent its error back (TVM's
#: ``RPCError``), so the server is alive and the failure is the candidate's own.
SERVER_ERROR = "Error caught from RPC call"
#: Seconds the tracker is given to see a server's death after a failed session.
GRACE_SEC = 0.5


def quiet_worker(initializer=None) -> None:
    """Initialize one of the runner's workers without TVM's RPC retry warnings (one line
    every 5 s for a minute per candidate when the tracker is gone: the watch says it once)
    and without the traceback of the thread TVM connects to the tracker in (its error
    reaches the runner as the session's failure anyway), then run ``initializer``."""
    logging.getLogger("RPCServer").setLevel(logging.CRITICAL)
    threading.excepthook = _session_thread_error
    if initializer is not None:
        initializer()


#: Where MetaSchedule connects to the tracker in a thread of its own
#: (``RPCConfig.connect_tracker``): the function's name and the end of its file's path.
TRACKER_THREAD = ("_connect", os.path.join("meta_schedule", "runner", "config.py"))


def _session_thread_error(args: threading.ExceptHookArgs) -> None:
    """A thread of a runner worker failed. The tracker connection's failure (the known
    noise: :data:`TRACKER_THREAD`) prints nothing: its session fails with it, and the watch
    reports the farm. Any other thread's error is one warning line."""
    frames = traceback.extract_tb(args.exc_traceback) if args.exc_traceback else []
    name, path = TRACKER_THREAD
    if any(f.name == name and f.filename.endswith(path) for f in frames):
        return
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    logger.warning("a thread (%s) of an RPC runner worker failed%s: %s: %s",
                   getattr(args.thread, "name", "?"), where, args.exc_type.__name__,
                   one_line(str(args.exc_value), 200))


@derived_object
class WatchedRPCRunner(PyRunner):
    """An ``RPCRunner`` whose farm is checked while it measures (see the module doc).

    Args:
        rpc: The tracker and key.
        inner: MetaSchedule's ``RPCRunner`` on them.
        servers: Servers under the key when tuning starts.
    """

    def __init__(self, rpc: RPCSettings, inner, servers: int) -> None:
        super().__init__()
        register_ffi_errors()  # the stop crosses TVM's FFI as itself
        self.rpc, self.inner, self.servers = rpc, inner, int(servers)
        self.pool = inner.pool  # stopped with the session (tuner.app.session.Session.close)
        self.error: RunnerUnavailableError | None = None
        self.lost_at = float("-inf")  # when a server was last seen to have left

    def run(self, runner_inputs: list) -> list:
        """Check the farm, then hand the batch to the ``RPCRunner``.

        Raises:
            RunnerUnavailableError: The tracker or every server is gone.
        """
        self.farm()
        futures = self.inner.run(runner_inputs)
        return [WatchedFuture(self, i, f) for i, f in zip(runner_inputs, futures, strict=True)]

    def farm(self) -> int:
        """The servers under the key now, checked.

        Raises:
            RunnerUnavailableError: The tracker does not answer or no server is left
                (tuning stops: see :meth:`stop`).
        """
        if self.error is not None:
            raise self.error
        try:
            return check_tracker(self.rpc, connect_timeout_sec=3.0)
        except RunnerUnavailableError as err:
            raise self.stop(str(err)) from None

    def stop(self, reason: str) -> RunnerUnavailableError:
        """Kill the runner's workers and make the one-line error that stops tuning."""
        from tuner.engine.builder import stop_pool

        fmt = {"host": self.rpc.tracker_host, "port": self.rpc.tracker_port,
               "key": self.rpc.key}
        what = (f"the RPC tracker at {fmt['host']}:{fmt['port']} stopped answering"
                if reason.startswith("no RPC tracker") else
                f"no RPC server is left under key {self.rpc.key!r}")
        self.error = RunnerUnavailableError(
            f"{what} while tuning: stopped; the measurements already in the work dir are "
            "kept and the batch in flight is not recorded; start the tracker "
            f"({START_TRACKER.format(**fmt)}) and its servers ({START_SERVER.format(**fmt)}), "
            "then rerun the same command to resume")
        stop_pool(self.pool, grace_s=2.0)
        return self.error

    def lost_server(self) -> bool:
        """Whether a server left the farm since the last look (warned once each time); the
        farm is checked (:meth:`farm` raises when it is gone)."""
        now = self.farm()
        if now >= self.servers:
            return False
        logger.warning("%d of the %d RPC servers under key %r went away: their candidates are "
                       "measured again on the %d left", self.servers - now, self.servers,
                       self.rpc.key, now)
        self.servers, self.lost_at = now, time.monotonic()
        return True


@derived_object
class WatchedFuture(PyRunnerFuture):
    """One candidate's measurement, waited for with the farm in view.

    Args:
        runner: The :class:`WatchedRPCRunner`.
        runner_input: What was sent (sent again if its server goes away).
        future: The ``RPCRunner``'s future.
    """

    def __init__(self, runner: WatchedRPCRunner, runner_input, future) -> None:
        super().__init__()
        self.runner, self.runner_input, self.future = runner, runner_input, future
        self.sent_at = time.monotonic()

    def done(self) -> bool:
        return bool(self.future.done())

    def result(self) -> RunnerResult:
        """The measurement; a candidate whose server went away is measured again.

        Raises:
            RunnerUnavailableError: The farm is gone (the batch is then not committed).
        """
        result = self._wait(self.future)
        for _ in range(RERUNS):
            if not self._server_lost(result.error_msg):
                return result
            self.sent_at = time.monotonic()
            result = self._wait(self.runner.inner.run([self.runner_input])[0])
        return result

    def _server_lost(self, error_msg: str | None) -> bool:
        """Whether the measurement failed because its server left the farm (see the
        module doc); waits :data:`GRACE_SEC` only for a failed session while no server is
        known to have left since the candidate was sent."""
        if error_msg is None or SERVER_ERROR in error_msg:
            return False  # measured, or the server ran it and sent its own error back
        if self.runner.lost_server() or self.runner.lost_at >= self.sent_at:
            return True
        time.sleep(GRACE_SEC)  # the tracker may not have seen a server's death yet
        return self.runner.lost_server()

    def _wait(self, future) -> RunnerResult:
        """``future``'s result, checking the farm every :data:`CHECK_EVERY_SEC` seconds."""
        last = time.monotonic()
        while not future.done():
            if self.runner.error is not None:
                raise self.runner.error
            time.sleep(0.1)
            if time.monotonic() - last >= CHECK_EVERY_SEC:
                self.runner.farm()
                last = time.monotonic()
        return future.result()


def make_rpc_runner(rpc: RPCSettings, evaluator, initializer=None):
    """MetaSchedule's ``RPCRunner`` on the tracker's servers under ``rpc.key``, watched
    (:class:`WatchedRPCRunner`).

    Args:
        rpc: Tracker, key and limits.
        evaluator: The ``ms.runner.EvaluatorConfig`` (how each candidate is timed).
        initializer: Run in each local worker that drives a session.

    Raises:
        RunnerUnavailableError: See :func:`check_tracker`.
    """
    import functools

    from tvm.s_tir import meta_schedule as ms

    servers = check_tracker(rpc)
    config = ms.runner.RPCConfig(tracker_host=rpc.tracker_host,
                                 tracker_port=int(rpc.tracker_port), tracker_key=rpc.key,
                                 session_timeout_sec=int(rpc.session_timeout_sec))
    inner = ms.runner.RPCRunner(rpc_config=config, evaluator_config=evaluator,
                                max_workers=int(rpc.servers),
                                initializer=functools.partial(quiet_worker, initializer))
    return WatchedRPCRunner(rpc, inner, servers)
