"""A MetaSchedule JSON database read line by line as it grows, and appended to whole lines at
a time (the tuning memory's files, and a work dir's when its records go to the memory).

The two files are MetaSchedule's (:mod:`metatune.records`): ``database_workload.json``
(``[structural hash, base64 module]`` a line; the line number is the workload's index) and
``database_tuning_record.json`` (``[workload index, [trace, run_secs, target, args]]``).
:class:`DatabaseFiles` reads only the complete lines added since its last read, so a file
is read once however often it is asked. A line that does not parse (the tail of a write
that was killed, finished by the next writer's newline) is skipped and keeps its index, as
``tuner.engine.database.check_database_files`` counts lines; a record of a bad or missing
workload line is skipped too. Nothing here needs TVM.

:func:`append_lines` writes lines in one ``write`` to a file opened for appending, after a
newline if the file ends in a torn line, then flushes them to the disk (``fsync``): a
process killed while writing loses at most the line it was writing.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
from collections import Counter
from dataclasses import dataclass

from metatune.records import RECORD_FILE, WORKLOAD_FILE, measured_seconds


def trace_digest(trace) -> str:
    """A short digest of a trace's JSON: a record's identity within its workload."""
    text = json.dumps(trace, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class StoredRecord:
    """One record of a database's files.

    Attributes:
        key: Its workload's structural hash (as the workload line spells it).
        body: ``[trace, run_secs, target, args_info]`` (``TuningRecord.from_json``'s input).
        seconds: Its mean run time (``None``: a failed measurement).
        digest: :func:`trace_digest` of its trace.
    """

    key: str
    body: list
    seconds: float | None
    digest: str


def _workload_key(line: bytes) -> str | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    ok = isinstance(obj, list) and len(obj) == 2 and all(isinstance(x, str) for x in obj)
    return obj[0] if ok else None


def _record(line: bytes) -> tuple[int, list] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not (isinstance(obj, list) and len(obj) == 2 and isinstance(obj[1], list)
            and len(obj[1]) == 4 and isinstance(obj[1][0], list)):
        return None
    index = obj[0]
    if isinstance(index, bool) or not isinstance(index, int):
        return None
    return index, obj[1]


class DatabaseFiles:
    """What a database directory's files hold, read as they grow (see the module docstring).

    Args:
        directory: The directory of the two files (they may not exist yet).
        keep: Valid records kept in memory per workload, the fastest (the others are only
            counted and their digests kept).

    Attributes:
        keys: The structural hash of each workload line, ``None`` for a bad line.
        index: Structural hash -> the index of its first workload line.
        counts: Records per workload (valid or not).
        valid: Valid records per workload.
        digests: ``(workload, trace digest)`` of every record read.
    """

    def __init__(self, directory: str, keep: int = 32) -> None:
        self.directory = directory
        self.keep = int(keep)
        self.keys: list[str | None] = []
        self.index: dict[str, int] = {}
        self._line_at: dict[str, int] = {}  # hash -> byte offset of its workload line
        self.counts: Counter = Counter()
        self.valid: Counter = Counter()
        self.digests: set[tuple[str, str]] = set()
        self._best: dict[str, list] = {}  # hash -> heap of (-seconds, n, record)
        self._offsets = {WORKLOAD_FILE: 0, RECORD_FILE: 0}
        self._read = 0

    def path(self, name: str) -> str:
        """The path of one of the two files."""
        return os.path.join(self.directory, name)

    def _new_lines(self, name: str) -> list[tuple[int, bytes]]:
        """The complete lines added to ``name`` since the last read, with their offsets."""
        start = self._offsets[name]
        try:
            with open(self.path(name), "rb") as f:
                f.seek(start)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self._offsets[name] = start + end
        lines, pos = [], 0
        for line in data[:end].splitlines(keepends=True):
            lines.append((start + pos, line))
            pos += len(line)
        return lines

    def refresh(self) -> list[StoredRecord]:
        """Read what was added since the last call (workloads first, as they are written).

        Returns:
            The records read now, in file order.
        """
        for offset, line in self._new_lines(WORKLOAD_FILE):
            key = _workload_key(line)
            if key is not None and key not in self.index:
                self.index[key] = len(self.keys)
                self._line_at[key] = offset
            self.keys.append(key)
        new = []
        for _, line in self._new_lines(RECORD_FILE):
            parsed = _record(line)
            if parsed is None or not 0 <= parsed[0] < len(self.keys) \
                    or self.keys[parsed[0]] is None:
                continue
            key, body = self.keys[parsed[0]], parsed[1]
            try:
                seconds = measured_seconds(body[1])
            except (TypeError, ValueError):
                continue
            record = StoredRecord(key, body, seconds, trace_digest(body[0]))
            new.append(record)
            self.counts[key] += 1
            self.digests.add((key, record.digest))
            if seconds is not None:
                self.valid[key] += 1
                heap = self._best.setdefault(key, [])
                self._read += 1
                item = (-seconds, -self._read, record)  # the slowest on top
                if len(heap) < self.keep:
                    heapq.heappush(heap, item)
                elif item > heap[0]:
                    heapq.heapreplace(heap, item)
        return new

    def best(self, key: str, k: int | None = None) -> list[StoredRecord]:
        """The fastest valid records of a workload read so far (at most ``keep``), fastest
        first."""
        heap = self._best.get(key, [])
        ranked = [r for _, _, r in sorted(heap, key=lambda t: (-t[0], -t[1]))]
        return ranked if k is None else ranked[:k]

    def workload_line(self, key: str) -> list:
        """The workload line ``[hash, base64 module]`` of a workload read so far.

        Raises:
            KeyError: No workload line with that hash was read.
        """
        with open(self.path(WORKLOAD_FILE), "rb") as f:
            f.seek(self._line_at[key])
            return json.loads(f.readline())

    def ends_in_torn_line(self, name: str) -> bool:
        """Whether a file's last line lacks its newline (a write was cut)."""
        try:
            with open(self.path(name), "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() == 0:
                    return False
                f.seek(-1, os.SEEK_END)
                return f.read(1) != b"\n"
        except FileNotFoundError:
            return False


def append_lines(path: str, lines: list[str], after_torn: bool = False) -> None:
    """Append whole lines to ``path`` in one write, flushed to the disk.

    Args:
        path: The file (made if missing).
        lines: Lines without their newline.
        after_torn: The file ends in a torn line: end it first, so that it stays one bad
            line of its own.

    Raises:
        OSError: The write failed (a full disk, an unwritable directory).
    """
    if not lines and not after_torn:
        return
    data = ("\n" if after_torn else "") + "".join(line + "\n" for line in lines)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data.encode())
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def append_records(files: DatabaseFiles, items: list[tuple[list, list]]) -> int:
    """Append records to a database's files, skipping those it holds (same workload and
    trace); call it under the files' exclusive lock.

    Args:
        files: The database's files (read up to date here first).
        items: ``(workload line [hash, base64 module], record body)`` pairs.

    Returns:
        How many records were added.

    Raises:
        OSError: A write failed; the lines written before it stay whole.
    """
    for name in (WORKLOAD_FILE, RECORD_FILE):  # a torn tail becomes a bad line of its own
        if files.ends_in_torn_line(name):
            append_lines(files.path(name), [], after_torn=True)
    files.refresh()
    new_workloads: list[str] = []
    records: list[str] = []
    index = dict(files.index)
    seen = set(files.digests)
    for workload, body in items:
        key = str(workload[0])
        mark = (key, trace_digest(body[0]))
        if mark in seen:
            continue
        seen.add(mark)
        if key not in index:
            index[key] = len(files.keys) + len(new_workloads)
            new_workloads.append(json.dumps([key, workload[1]]))
        records.append(json.dumps([index[key], body]))
    append_lines(files.path(WORKLOAD_FILE), new_workloads)  # before the records that use them
    append_lines(files.path(RECORD_FILE), records)
    files.refresh()
    return len(records)
