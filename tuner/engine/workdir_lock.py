"""An advisory lock on a work dir, so that two runs never append to one database.

Two ``tune.py`` runs on one work dir interleave their workload lines and measure the same
trials twice. :class:`WorkDirLock` takes ``fcntl.flock`` on ``<work_dir>/.lock`` (which
holds the owner's pid); a second run refuses at once, naming that pid. The kernel drops the
lock when the process ends in any way, ``kill -9`` included.

:func:`claimed_work_dir` makes, checks and locks a work dir for one run, and takes back
what the run made when it fails before its first measurement: a refused run leaves no
empty database, lock or ``settings.json`` behind.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from metatune.errors import WorkDirBusyError, WorkDirError

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
            raise WorkDirBusyError(
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


#: What a run puts in a work dir before its first measurement (removed again when it fails
#: then, in a work dir that was there before it).
RECORDS = "database_tuning_record.json"  #: the measurements (tuner.engine.database.RECORD_FILE)
FIRST_ENTRIES = ("database_workload.json", RECORDS, "settings.json",
                 LOCK_FILE, "logs", "tensorboard", "curves.jsonl", "rounds.jsonl")


def _has_records(work_dir: str) -> bool:
    path = os.path.join(work_dir, RECORDS)
    return os.path.exists(path) and os.path.getsize(path) > 0


@contextmanager
def claimed_work_dir(work_dir: str) -> Iterator[WorkDirLock]:
    """Make the work dir if needed, check it is writable and hold its lock for a ``with``
    block. An exception that leaves the block while the work dir holds no measurement takes
    back what this run made: the whole work dir if the run created it, else the entries of
    :data:`FIRST_ENTRIES` that were not there before. Ctrl-C leaves everything as it is.

    Raises:
        WorkDirError: It cannot be created or written, or another run holds it.
    """
    from tuner.engine.database import ensure_work_dir

    created = not os.path.exists(work_dir)
    before = set() if created else set(os.listdir(work_dir))
    ensure_work_dir(work_dir)
    lock = WorkDirLock(work_dir)
    try:
        lock.acquire()
    except WorkDirBusyError:  # another run's work dir is never touched
        raise
    except Exception:
        _take_back(work_dir, created, before)
        raise
    try:
        yield lock
    except Exception:  # taken back while the lock is held: no other run can be in it
        _take_back(work_dir, created, before)
        raise
    finally:
        lock.release()


def _take_back(work_dir: str, created: bool, before: set[str]) -> None:
    """Remove what a failed run made in ``work_dir`` (see :func:`claimed_work_dir`), unless
    the work dir holds a measurement."""
    if _has_records(work_dir):
        return
    if created:
        shutil.rmtree(work_dir, ignore_errors=True)
        return
    for name in FIRST_ENTRIES:
        path = os.path.join(work_dir, name)
        if name in before or not os.path.lexists(path):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except OSError:
                pass
