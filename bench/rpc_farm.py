"""A tracker and servers on this machine (127.0.0.1 only): for ``bench.rpc_throughput``, the
RPC tests, and a first try of ``runner.kind=rpc`` before pointing it at real devices."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from metatune.errors import RunnerUnavailableError
from tuner.engine.rpc import RPCSettings, check_tracker


@dataclass
class LocalFarm:
    """What :func:`local_farm` started.

    Attributes:
        rpc: Settings that reach the farm (``runner.rpc``).
        tracker: The tracker process.
        servers: The server processes.
    """

    rpc: RPCSettings
    tracker: subprocess.Popen
    servers: list[subprocess.Popen] = field(default_factory=list)

    def kill_server(self, i: int) -> None:
        """Kill server ``i`` at once, as a crashed device would go (tests, fault runs)."""
        stop_process(self.servers[i])


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], threads: int) -> subprocess.Popen:
    """Start ``python -m <args>`` in a process group of its own: TVM's ``rpc_tracker`` and
    ``rpc_server`` run their loop in a child worker, which :func:`stop_process` must reach."""
    env = {**os.environ, "TVM_NUM_THREADS": str(threads)}
    return subprocess.Popen([sys.executable, "-m", *args], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_process(proc: subprocess.Popen) -> None:
    """Kill a process started by :func:`_start` with its whole group, and reap it.

    Killing only ``tvm.exec.rpc_tracker`` / ``rpc_server`` leaves the worker that runs the
    tracker's or server's loop alive, orphaned, serving and holding its memory (seen:
    three such workers of 700 MB each outlived a test run).
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()  # the group is gone already, or not ours: the process alone
    proc.wait()


@contextmanager
def local_farm(servers: int, *, key: str = "metatune-local", threads: int = 1,
               session_timeout_sec: int = 15, ready_sec: float = 90.0) -> Iterator[LocalFarm]:
    """Start a tracker and ``servers`` servers on 127.0.0.1; stop them on exit.

    Args:
        servers: Servers to start under ``key``.
        key: Their device key.
        threads: TVM threads of each server (``TVM_NUM_THREADS``).
        session_timeout_sec: ``runner.rpc.session_timeout_sec`` of the returned settings.
        ready_sec: How long to wait for every server to register.

    Raises:
        RunnerUnavailableError: The servers did not register in time.
    """
    port = free_port()
    farm = LocalFarm(RPCSettings(tracker_port=port, key=key, servers=servers,
                                 session_timeout_sec=session_timeout_sec),
                     _start(["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
                             "--port-end", str(port + 1), "--silent"], threads))
    try:
        deadline = time.time() + ready_sec
        while not _answers(port) and time.time() < deadline:
            time.sleep(0.3)
        for _ in range(servers):
            sp = free_port()
            farm.servers.append(_start(
                ["tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(sp), "--port-end",
                 str(sp + 1), "--tracker", f"127.0.0.1:{port}", "--key", key, "--silent"],
                threads))
        while registered(farm.rpc) < servers:
            if time.time() > deadline:
                raise RunnerUnavailableError(f"the local RPC servers did not register with "
                                             f"the tracker within {ready_sec:.0f} s")
            time.sleep(0.5)
        yield farm
    finally:
        for proc in [farm.tracker, *farm.servers]:
            stop_process(proc)


def registered(rpc: RPCSettings) -> int:
    """Servers under ``rpc.key`` (0 when there is no tracker or none registered)."""
    try:
        return check_tracker(rpc, connect_timeout_sec=1)
    except RunnerUnavailableError:
        return 0


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False
