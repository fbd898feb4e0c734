"""Checks that every committed round reached the disk, and stops tuning when it did not.

MetaSchedule's ``JSONDatabase`` appends records from C++ and ignores failed writes: on a
full disk it kept tuning (and counting trials) while its files held a torn line. The
:class:`RecordFileGuard` runs after the database commit of every round (it is the first
monitor of :class:`tuner.app.monitor.MonitorCallback`) and checks that the record file grew by
one complete line per measured candidate. If it did not, it cuts the torn tail off (so the
records already written stay loadable), and stops tuning with a one-line
:class:`~metatune.errors.WorkDirError` naming the work dir and its free space; the
monitors after it never count the lost round.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil

from metatune.errors import WorkDirError
from tuner.engine.database import RECORD_FILE, WORKLOAD_FILE

logger = logging.getLogger(__name__)

#: ``errno`` values of writes that fail because of the work dir's disk or permissions.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.ENOENT, errno.EIO})


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _end_with_newline(path: str) -> None:
    """Append a newline to a file whose last line lacks one (TVM would glue lines)."""
    if _size(path) == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) != b"\n":
            f.write(b"\n")


def _cut_torn_tail(path: str, start: int) -> int:
    """Truncate ``path`` after its last newline at or beyond ``start``.

    Returns:
        The number of complete lines from ``start`` on.
    """
    size = _size(path)
    if size <= start:
        return 0
    with open(path, "rb+") as f:
        f.seek(start)
        data = f.read()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            f.truncate(start + end)
    return data[:end].count(b"\n")


def write_failure(work_dir: str, what: str, reason: str | None = None) -> WorkDirError:
    """The one-line error for a failed write into the work dir.

    Probes the work dir to tell a full disk from an unwritable directory, and names the
    free space either way.

    Args:
        work_dir: The work directory.
        what: What was being written, e.g. ``"the tuning database"``.
        reason: The write's own error text, if known.
    """
    try:
        free = f"{shutil.disk_usage(work_dir).free / 2**20:.1f} MiB free"
    except OSError:
        free = "free space unknown"
    probe = os.path.join(work_dir, ".write-test")
    try:
        with open(probe, "w", encoding="utf-8") as f:
            f.write("x" * 4096)
            f.flush()
            os.fsync(f.fileno())
        os.remove(probe)
        cause = reason or "the disk is full"
    except OSError as err:
        cause = err.strerror or str(err)
        try:
            os.remove(probe)
        except OSError:
            pass
    return WorkDirError(
        f"writing {what} in {work_dir} failed ({cause}; {free}): tuning stopped and every "
        "record on disk is kept; free some space or make the work dir writable (or pass "
        "another --work-dir), then rerun the same command to resume"
    )


class RecordFileGuard:
    """After each committed round, checks that its records are on disk (see module doc).

    Use it through :class:`tuner.app.monitor.MonitorCallback`, before any monitor that counts.

    Args:
        work_dir: The work directory whose database TVM appends to.
    """

    def __init__(self, work_dir: str) -> None:
        self.work_dir = work_dir
        self.records = os.path.join(work_dir, RECORD_FILE)
        self.workloads = os.path.join(work_dir, WORKLOAD_FILE)
        for path in (self.records, self.workloads):
            _end_with_newline(path)
        self.offset = _size(self.records)
        self.error: WorkDirError | None = None

    def observe(self, task_id: int, builder_results, runner_results) -> None:
        """Check the round just committed.

        Raises:
            WorkDirError: The record file did not grow by one complete line per result
                (also kept in :attr:`error`, since it crosses TVM's FFI).
        """
        expected = len(runner_results)
        size = _size(self.records)
        if size > self.offset:
            with open(self.records, "rb") as f:
                f.seek(self.offset)
                data = f.read()
            complete = data.count(b"\n")
            torn = not data.endswith(b"\n")
        else:
            complete, torn = 0, False
        if complete >= expected and not torn:
            self.offset = size
            return
        kept = _cut_torn_tail(self.records, self.offset)
        _cut_torn_tail(self.workloads, 0)
        self.offset = _size(self.records)
        logger.error("the record file holds %d of the round's %d records", kept, expected)
        self.error = write_failure(self.work_dir, "the tuning database")
        raise self.error


def as_write_error(err: BaseException, work_dir: str) -> WorkDirError | None:
    """A :class:`WorkDirError` for an exception caused by writing into the work dir.

    Args:
        err: An exception raised while tuning (possibly through TVM's FFI).
        work_dir: The work directory.

    Returns:
        The one-line error, or ``None`` when ``err`` is not a failed write.
    """
    if isinstance(err, OSError) and err.errno in WRITE_ERRNOS:
        inside = str(err.filename or "").startswith(work_dir)
        if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) or inside:
            return write_failure(work_dir, err.filename or "a file", err.strerror)
        return None
    if "Cannot open the file to write" in str(err) or not os.access(work_dir, os.W_OK):
        return write_failure(work_dir, "the tuning database", "cannot open its files to write")
    return None
