"""The tuning memory's lock and claims: one process writes at a time, and a task that one run
is tuning is not tuned by another.

:func:`locked` takes ``fcntl.flock`` on ``<memory>/.lock`` for a ``with`` block (exclusive
to write, shared to read); the kernel drops it when the process ends in any way.

A :class:`Claim` is a file ``<memory>/claims/<workload hash>.json`` naming the run tuning
that workload (pid, host, the process's start time, its work dir). Claims are taken,
checked and released under the exclusive lock. A claim is live while its process runs
(same host: the pid exists and started when the claim says, so a reused pid is not
mistaken for it) or, for a claim of another host, while its file was touched within
``stale_after`` seconds (the owner touches its claims after every round). A claim that is
not live is stale and is taken over.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from metatune.files import write_json_atomic

LOCK_FILE = ".lock"
CLAIMS_DIR = "claims"


@contextmanager
def locked(directory: str, shared: bool = False) -> Iterator[None]:
    """Hold the memory's lock for a ``with`` block (blocking until it is free).

    Args:
        directory: The memory's directory (it exists).
        shared: A reader's shared lock instead of the writer's exclusive one.

    Raises:
        OSError: The lock file cannot be opened.
    """
    fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the lock


def process_started(pid: int) -> float | None:
    """When process ``pid`` of this host started (seconds since the epoch), ``None`` when no
    such process runs (a zombie counts as ended)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except psutil.Error:
        return None


@dataclass(frozen=True)
class Claim:
    """Who tunes a workload.

    Attributes:
        pid: The process id.
        host: The host's name.
        started: When the process started (:func:`process_started`).
        work_dir: The run's work dir (for messages).
    """

    pid: int
    host: str
    started: float
    work_dir: str

    @classmethod
    def mine(cls, work_dir: str) -> Claim:
        """A claim of this process."""
        pid = os.getpid()
        return cls(pid, socket.gethostname(), process_started(pid) or 0.0, work_dir)

    def describe(self) -> str:
        """``pid 123 on host (work dir work/resnet-18)``."""
        return f"pid {self.pid} on {self.host} (work dir {self.work_dir})"

    def same_process(self, other: Claim) -> bool:
        """Whether both claims were made by one process."""
        return (self.pid, self.host) == (other.pid, other.host) \
            and abs(self.started - other.started) < 1.0


class Claims:
    """The claim files of one memory directory. Call every method under the exclusive
    :func:`locked` (except :meth:`holder`, which is only advice without it).

    Args:
        directory: The memory's directory.
        stale_after: Seconds after which a claim of another host that was not touched is
            stale.
    """

    def __init__(self, directory: str, stale_after: float = 600.0) -> None:
        self.dir = os.path.join(directory, CLAIMS_DIR)
        self.stale_after = float(stale_after)

    def _path(self, key: str) -> str:
        return os.path.join(self.dir, f"{key}.json")

    def _read(self, key: str) -> tuple[Claim, float] | None:
        """The claim on ``key`` and its file's modification time, ``None`` when there is
        none or it is unreadable (a claim written whole or not at all: unreadable is
        nobody's)."""
        path = self._path(key)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            claim = Claim(int(data["pid"]), str(data["host"]), float(data["started"]),
                          str(data.get("work_dir", "")))
            return claim, os.path.getmtime(path)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def live(self, claim: Claim, mtime: float) -> bool:
        """Whether a claim's run still runs (see the module docstring)."""
        if claim.host == socket.gethostname():
            started = process_started(claim.pid)
            return started is not None and abs(started - claim.started) < 1.0
        return time.time() - mtime < self.stale_after

    def holder(self, key: str, me: Claim) -> Claim | None:
        """The live claim of another process on ``key``, or ``None``."""
        found = self._read(key)
        if found is None or found[0].same_process(me) or not self.live(*found):
            return None
        return found[0]

    def take(self, keys: list[str], me: Claim) -> dict[str, Claim]:
        """Claim every key not held by another live run.

        Returns:
            The keys held by others, with their claims (those are not taken).
        """
        os.makedirs(self.dir, exist_ok=True)
        theirs: dict[str, Claim] = {}
        for key in dict.fromkeys(keys):
            other = self.holder(key, me)
            if other is not None:
                theirs[key] = other
            else:
                write_json_atomic(self._path(key), asdict(me))
        return theirs

    def touch(self, keys: list[str]) -> None:
        """Mark our claims as alive (for runs on other hosts that share the memory)."""
        for key in keys:
            try:
                os.utime(self._path(key))
            except OSError:
                pass

    def release(self, keys: list[str], me: Claim) -> None:
        """Remove our claims on ``keys`` (a claim another run took over is left)."""
        for key in keys:
            found = self._read(key)
            if found is not None and found[0].same_process(me):
                try:
                    os.remove(self._path(key))
                except OSError:
                    pass
