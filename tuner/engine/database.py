"""The tuning database in the work dir: checked before TVM opens it, counted per task."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections import Counter

from metatune.errors import DatabaseCorruptError, WorkDirError
from metatune.records import measured_seconds

logger = logging.getLogger(__name__)

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


def _bad_lines(path: str) -> list[int]:
    """1-based numbers of the lines of a JSON-lines file that are not JSON arrays."""
    bad = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                ok = isinstance(json.loads(line), list)
            except json.JSONDecodeError:
                ok = False
            if not ok:
                bad.append(number)
    return bad


def check_database_files(work_dir: str, repair: bool = False) -> int:
    """Check the JSON database files of a work dir line by line, optionally repairing.

    An interrupted write leaves a truncated last line; hand edits or disk faults can
    break any line. Nothing is ever deleted: ``repair`` moves the unreadable lines to
    ``<file>.corrupt`` after backing the file up as ``<file>.bak``.

    Args:
        work_dir: The tuning work directory.
        repair: Move unreadable lines aside instead of raising.

    Returns:
        The number of lines moved aside (0 when the files are sound).

    Raises:
        DatabaseCorruptError: A file has unreadable lines and ``repair`` is false.
    """
    moved = 0
    for name in (WORKLOAD_FILE, RECORD_FILE):
        path = os.path.join(work_dir, name)
        if not os.path.exists(path):
            continue
        bad = _bad_lines(path)
        if not bad:
            continue
        if name == WORKLOAD_FILE and repair:
            # Record lines refer to workloads by line index: dropping one would shift them.
            raise DatabaseCorruptError(
                f"{path}: line(s) {bad[:5]} are unreadable and records refer to workloads by "
                "line number, so it cannot be repaired in place; move the work dir aside and "
                "start a new one (its measurements stay in the old files)"
            )
        if not repair:
            raise DatabaseCorruptError(
                f"{path}: {len(bad)} unreadable line(s) (first: line {bad[0]}), e.g. from an "
                "interrupted write; rerun with --repair-db to move them to "
                f"{name}.corrupt and keep every readable record"
            )
        shutil.copyfile(path, path + ".bak")
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        bad_set = set(bad)
        with open(path + ".corrupt", "a", encoding="utf-8") as f:
            f.writelines(lines[i - 1] for i in bad)
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(line for i, line in enumerate(lines, 1) if i not in bad_set)
        logger.warning("%s: moved %d unreadable line(s) to %s.corrupt", path, len(bad), name)
        moved += len(bad)
    return moved


def ensure_work_dir(work_dir: str) -> None:
    """Create the work dir if needed and check that it is writable.

    Raises:
        WorkDirError: It cannot be created or written.
    """
    try:
        os.makedirs(work_dir, exist_ok=True)
        probe = os.path.join(work_dir, ".write-test")
        with open(probe, "w", encoding="utf-8") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as err:
        raise WorkDirError(
            f"work dir {work_dir!r} is not writable ({err.strerror}); pass --work-dir "
            "with a directory you can write to"
        ) from err


def open_database(work_dir: str, repair: bool = False):
    """Open (or create) the MetaSchedule JSON database of a work dir, checked first.

    Raises:
        DatabaseCorruptError: The files are unreadable (see :func:`check_database_files`)
            or TVM refuses them.
    """
    from tvm.s_tir import meta_schedule as ms

    check_database_files(work_dir, repair=repair)
    try:
        return ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")
    except Exception as err:  # TVM raises its own error types on bad content
        raise DatabaseCorruptError(
            f"TVM cannot load the database in {work_dir!r}: {str(err).splitlines()[-1]}; "
            "move the work dir aside and start a new one (the old files keep their records)"
        ) from err


def as_candidate(sch):
    """A replayed schedule as a MetaSchedule ``MeasureCandidate`` (what cost models score)."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    return ms.MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True))


def measured_per_task(database, task_mods: list) -> list[int]:
    """Count the measurements (valid or not) stored for each task.

    Args:
        database: A MetaSchedule database.
        task_mods: Each task's ``IRModule``.

    Returns:
        One count per task.
    """
    return [measured for _, measured in valid_and_measured_per_task(database, task_mods)]


def valid_and_measured_per_task(database, task_mods: list) -> list[tuple[int, int]]:
    """``(valid, measured)`` counts of each task's records (failures have no valid time)."""
    from tvm_ffi import structural_hash

    valid: Counter = Counter()
    total: Counter = Counter()
    for r in database.get_all_tuning_records():
        key = structural_hash(r.workload.mod)
        total[key] += 1
        valid[key] += int(measured_seconds(r.run_secs) is not None)
    keys = [structural_hash(mod) for mod in task_mods]
    return [(valid.get(k, 0), total.get(k, 0)) for k in keys]


def best_seconds_per_task(database, task_mods: list) -> list[float | None]:
    """The best measured mean run time of each task, in seconds (``None`` if none valid)."""
    best: list[float | None] = []
    for mod in task_mods:
        value = None
        if database.has_workload(mod):
            top = database.get_top_k(database.commit_workload(mod), 1)
            if top:
                value = measured_seconds(top[0].run_secs)
        best.append(value)
    return best
