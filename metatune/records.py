"""Read MetaSchedule JSON databases (plain or gzipped) without TVM, tolerating bad lines.

A database is two JSON-lines files: ``database_workload.json`` (``[shash, base64 IRModule]``
per line; the line number is the workload index) and ``database_tuning_record.json``
(``[workload_index, [trace, run_secs, target, args_info]]`` per line).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
#: Run times at or above this are MetaSchedule's marker of a failed measurement.
FAILED_SECONDS = 1e9


@dataclass
class Record:
    """One measured candidate.

    Attributes:
        workload: Index of its workload in the workload file.
        trace: The trace JSON (the schedule's instructions and sampling decisions).
        run_secs: Measured run times in seconds, or ``None`` if the measurement failed.
        line: 1-based line number in the record file.
        raw: The record's JSON (``[trace, run_secs, target, args_info]``), as MetaSchedule's
            ``TuningRecord.from_json`` takes it.
    """

    workload: int
    trace: list
    run_secs: list[float] | None
    line: int
    raw: list = field(default_factory=list, repr=False)

    @property
    def valid(self) -> bool:
        """Whether the measurement succeeded (see :func:`measured_seconds`)."""
        return measured_seconds(self.run_secs) is not None

    @property
    def mean_seconds(self) -> float | None:
        """Mean run time, or ``None`` when invalid."""
        return measured_seconds(self.run_secs)


def measured_seconds(run_secs: Sequence | None, error_msg: str | None = None) -> float | None:
    """The mean run time of one measurement in seconds, or ``None`` when it failed.

    The one rule for a failed measurement, used wherever run times are read (records,
    runner results, the database): a measurement failed when it carries an error message,
    has no run times, or has a run time outside ``(0, FAILED_SECONDS)``.

    Args:
        run_secs: The measurement's run times (floats, or TVM ``FloatImm`` s), or ``None``.
        error_msg: The runner's error message, if any (a ``RunnerResult``'s ``error_msg``).

    Returns:
        The mean of the run times, or ``None``.
    """
    if error_msg or not run_secs:
        return None
    secs = [float(s) for s in run_secs]
    if not all(0 < s < FAILED_SECONDS for s in secs):
        return None
    return sum(secs) / len(secs)


@dataclass
class ReadStats:
    """Counts of a read: lines read, records kept, and corrupt lines skipped."""

    lines: int = 0
    records: int = 0
    corrupt: int = 0
    corrupt_lines: list[int] = field(default_factory=list)


def _open(path: str):
    """Open ``path`` or ``path + '.gz'``, whichever exists (plain first)."""
    if os.path.exists(path):
        return open(path, encoding="utf-8", errors="replace")
    if os.path.exists(path + ".gz"):
        return gzip.open(path + ".gz", "rt", encoding="utf-8", errors="replace")
    raise FileNotFoundError(f"{path} (or {path}.gz) does not exist")


def read_meta(split_dir: str) -> dict | None:
    """A dataset split's ``meta.json`` (written by the collector,
    :func:`tuner.app.collect_dataset.write_meta`), or ``None`` where it has none yet."""
    path = os.path.join(split_dir, "meta.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_workload_json(db_dir: str) -> list[list | None]:
    """The workload file's JSON entries in index order (``None`` for corrupt lines)."""
    entries: list[list | None] = []
    with _open(os.path.join(db_dir, WORKLOAD_FILE)) as f:
        for line in f:
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                entries.append(None)
    return entries


def read_workload_hashes(db_dir: str) -> list[str]:
    """Structural hashes of the workloads, in index order (corrupt lines become ``""``)."""
    hashes = []
    with _open(os.path.join(db_dir, WORKLOAD_FILE)) as f:
        for line in f:
            try:
                hashes.append(str(json.loads(line)[0]))
            except (json.JSONDecodeError, IndexError, TypeError):
                hashes.append("")
    return hashes


def iter_records(db_dir: str, stats: ReadStats | None = None) -> Iterator[Record]:
    """Yield the records of a database directory, skipping corrupt lines with a warning.

    Args:
        db_dir: Directory holding ``database_tuning_record.json`` (or ``.json.gz``).
        stats: Filled with counts when given.
    """
    stats = stats if stats is not None else ReadStats()
    with _open(os.path.join(db_dir, RECORD_FILE)) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            stats.lines += 1
            try:
                index, raw = json.loads(line)
                trace, run_secs = raw[0], raw[1]
                record = Record(int(index), trace,
                                None if run_secs is None else [float(s) for s in run_secs], number,
                                raw)
            except (json.JSONDecodeError, ValueError, TypeError):
                stats.corrupt += 1
                stats.corrupt_lines.append(number)
                logger.warning("%s line %d: corrupt record skipped", db_dir, number)
                continue
            stats.records += 1
            yield record
