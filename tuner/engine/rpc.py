"""Measurement on remote devices through TVM's RPC tracker (MetaSchedule's ``RPCRunner``).

A tracker (``python -m tvm.exec.rpc_tracker``) hands out sessions on the servers
(``python -m tvm.exec.rpc_server``) registered under a key, one key per kind of device.
Candidates are still built here; each is uploaded to a free server and timed there, on the
server's TVM runtime: start every server with ``TVM_NUM_THREADS`` set to the cores of the
device it measures. Before tuning starts, :func:`check_tracker` makes sure the tracker
answers and holds at least one server under the key, so that a typo costs one line, not a
run of failed measurements.

While tuning, :class:`tuner.engine.rpc_watch.WatchedRPCRunner` (made by
:func:`tuner.engine.rpc_watch.make_rpc_runner`) keeps watching them: before each batch and every few
seconds while one is measured, it asks the tracker (its own short query: TVM's client
retries for minutes). When the tracker stops answering or no server is left under the key,
tuning stops within seconds with one line (:class:`~metatune.errors.RunnerUnavailableError`),
the runner's workers are killed (no retry warnings, no thread tracebacks) and the batch in
flight is not committed: a candidate is never recorded as a failed measurement because the
farm went away. A candidate whose session failed while a server left the farm is measured
again on the servers that are left.
"""

from __future__ import annotations

import json
import socket
import struct
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


def tracker_summary(host: str, port: int, timeout_sec: float = 5.0) -> dict:
    """The tracker's summary (``server_info``, ``queue_info``), asked over one socket that
    gives up after ``timeout_sec`` (TVM's own client retries for a minute and more).

    Raises:
        OSError: Nothing answers, or the answer is cut off.
        RuntimeError: What answers is not a TVM RPC tracker.
    """
    from tvm.rpc import base

    with socket.create_connection((host, port), timeout=timeout_sec) as sock:
        sock.settimeout(timeout_sec)
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        if struct.unpack("<i", base.recvall(sock, 4))[0] != base.RPC_TRACKER_MAGIC:
            raise RuntimeError(f"{host}:{port} is not a TVM RPC tracker")
        data = json.dumps([base.TrackerCode.SUMMARY]).encode()
        sock.sendall(struct.pack("<i", len(data)) + data)
        size = struct.unpack("<i", base.recvall(sock, 4))[0]
        code, value = json.loads(base.recvall(sock, size).decode())
    if code != base.TrackerCode.SUCCESS:
        raise RuntimeError(f"the tracker at {host}:{port} answered {code}")
    return value


def check_tracker(rpc: RPCSettings, connect_timeout_sec: float = 5.0) -> int:
    """How many servers the tracker holds under ``rpc.key`` (free or busy).

    Raises:
        RunnerUnavailableError: No tracker answers at the address, or no server is
            registered under the key; the message says how to start one.
    """
    host, port = rpc.tracker_host, int(rpc.tracker_port)
    fmt = {"host": host, "port": port, "key": rpc.key}
    try:
        summary = tracker_summary(host, port, connect_timeout_sec)
    except (OSError, RuntimeError, ValueError) as err:
        raise RunnerUnavailableError(
            f"no RPC tracker answers at {host}:{port} ({err or type(err).__name__}): start "
            f"one with {START_TRACKER.format(**fmt)}, or set "
            "runner.rpc.tracker_host/tracker_port") from err
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
