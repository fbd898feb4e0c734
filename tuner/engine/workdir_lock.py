"""An advisory lock on a work dir, so that two runs never append to one database.

Two ``tune.py`` runs on one work dir interleave their workload lines and measure the same
trials twice. :class:`WorkDirLock` takes ``fcntl.flock`` on ``<work_dir>/.lock`` (which
holds the owner's pid); a second run refuses at once, naming that pid. The kernel drops the
lock when the process ends in any way, ``kill -9`` included.
"""

from __future__ import annotations

import fcntl
import os

from metatune.errors import WorkDirError

LOCK_FILE = ".lock"


class WorkDirLock:
    """Holds the work dir's lock while in a ``with`` block (or until :meth:`release`).

    Args:
        work_dir: An existing, writable work directory.
    """

    def __init__(self, work_dir: str) -> None:
        self.work_dir = work_dir
        self.path = os.path.join(work_dir, LOCK_FILE)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock.

        Raises:
            WorkDirError: Another process holds it, or the lock file cannot be written.
        """
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise WorkDirError(f"cannot create the lock file {self.path} ({err.strerror}); "
                               "pass --work-dir with a directory you can write to") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            owner = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise WorkDirError(
                f"work dir {self.work_dir} is in use by process {owner} (another tune.py "
                "run); wait for it to end, or pass another --work-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the file stays; its pid is stale until the next run)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WorkDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
