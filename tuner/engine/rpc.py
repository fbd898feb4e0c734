"""Measurement on remote devices through TVM's RPC tracker (MetaSchedule's ``RPCRunner``).

A tracker (``python -m tvm.exec.rpc_tracker``) hands out sessions on the servers
(``python -m tvm.exec.rpc_server``) registered under a key, one key per kind of device.
Candidates are still built here; each is uploaded to a free server and timed there, on the
server's TVM runtime: start every server with ``TVM_NUM_THREADS`` set to the cores of the
device it measures. Before tuning starts, :func:`check_tracker` makes sure the tracker
answers and holds at least one server under the key, so that a typo costs one line, not a
run of failed measurements.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from metatune.errors import ConfigError, RunnerUnavailableError

START_TRACKER = "python -m tvm.exec.rpc_tracker --host {host} --port {port}"
START_SERVER = ("TVM_NUM_THREADS=<cores> python -m tvm.exec.rpc_server --host <server ip> "
                "--tracker {host}:{port} --key {key}")


@dataclass
class RPCSettings:
    """Where the tracker is and which servers measure (the tune config's ``runner.rpc``).

    Attributes:
        tracker_host: The tracker's address.
        tracker_port: The tracker's port.
        key: The device key the servers registered under.
        session_timeout_sec: Longest a measurement session may take before it counts as
            failed (a server that died mid-round).
        servers: Sessions measured at once (at most the servers under the key).
    """

    tracker_host: str = "127.0.0.1"
    tracker_port: int = 9190
    key: str = "metatune"
    session_timeout_sec: int = 60
    servers: int = 1

    def __post_init__(self) -> None:
        """Check the port and the counts.

        Raises:
            ConfigError: A port outside 1-65535, or a count below 1.
        """
        if not 0 < int(self.tracker_port) < 65536:
            raise ConfigError(f"runner.rpc.tracker_port={self.tracker_port}: give a port "
                              "from 1 to 65535")
        for key in ("session_timeout_sec", "servers"):
            if getattr(self, key) < 1:
                raise ConfigError(f"runner.rpc.{key}={getattr(self, key)}: must be at least 1")


def check_tracker(rpc: RPCSettings, connect_timeout_sec: float = 5.0) -> int:
    """How many servers the tracker holds under ``rpc.key`` (free or busy).

    Raises:
        RunnerUnavailableError: No tracker answers at the address, or no server is
            registered under the key; the message says how to start one.
    """
    from tvm import rpc as tvm_rpc

    host, port = rpc.tracker_host, int(rpc.tracker_port)
    fmt = {"host": host, "port": port, "key": rpc.key}
    try:  # TVM's own client retries for a minute: fail fast on a closed port
        socket.create_connection((host, port), timeout=connect_timeout_sec).close()
        summary = tvm_rpc.connect_tracker(host, port).summary()
    except (OSError, RuntimeError) as err:
        raise RunnerUnavailableError(
            f"no RPC tracker answers at {host}:{port} ({err}): start one with "
            f"{START_TRACKER.format(**fmt)}, or set runner.rpc.tracker_host/tracker_port"
        ) from err
    queue = summary.get("queue_info", {}).get(rpc.key, {})
    registered = sum(1 for s in summary.get("server_info", [])
                     if s.get("key") == f"server:{rpc.key}")
    servers = max(registered, int(queue.get("free", 0)))
    if servers == 0:
        known = sorted(summary.get("queue_info", {})) or ["none"]
        raise RunnerUnavailableError(
            f"no RPC server is registered under key {rpc.key!r} at {host}:{port} (keys there: "
            f"{', '.join(known)}): start one with {START_SERVER.format(**fmt)}, or set "
            "runner.rpc.key")
    return servers


def make_rpc_runner(rpc: RPCSettings, evaluator, initializer=None):
    """MetaSchedule's ``RPCRunner`` on the tracker's servers under ``rpc.key``.

    Args:
        rpc: Tracker, key and limits.
        evaluator: The ``ms.runner.EvaluatorConfig`` (how each candidate is timed).
        initializer: Run in each local worker that drives a session.

    Raises:
        RunnerUnavailableError: See :func:`check_tracker`.
    """
    from tvm.s_tir import meta_schedule as ms

    check_tracker(rpc)
    config = ms.runner.RPCConfig(tracker_host=rpc.tracker_host,
                                 tracker_port=int(rpc.tracker_port), tracker_key=rpc.key,
                                 session_timeout_sec=int(rpc.session_timeout_sec))
    return ms.runner.RPCRunner(rpc_config=config, evaluator_config=evaluator,
                               max_workers=int(rpc.servers), initializer=initializer)
