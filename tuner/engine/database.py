"""The tuning database in the work dir: checked before TVM opens it, counted per task."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections import Counter

from metatune.errors import DatabaseCorruptError, WorkDirError
from metatune.files import write_text_atomic
from metatune.records import measured_seconds

logger = logging.getLogger(__name__)

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


def _parse(line: str):
    """A JSON value of one line, or ``None`` when the line is blank or not JSON."""
    if not line.strip():
        return None
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def _is_workload(obj) -> bool:
    """A workload line: ``[structural hash, base64 module]``."""
    return isinstance(obj, list) and len(obj) == 2 and all(isinstance(x, str) for x in obj)


def _record_index(obj, n_workloads: int) -> int | None:
    """The workload index of a well-formed record line ``[index, [trace, secs, target,
    args]]`` that refers to one of ``n_workloads`` lines; ``None`` if malformed."""
    if not (isinstance(obj, list) and len(obj) == 2 and isinstance(obj[1], list)):
        return None
    index, body = obj
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n_workloads:
        return None
    if len(body) != 4 or not isinstance(body[0], list) \
            or not (body[1] is None or isinstance(body[1], list)):
        return None
    return index


def _read_lines(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.readlines()


def _bad_lines(work_dir: str) -> tuple[list[str], list[str], list[int], list[int]]:
    """Lines of both files and the 1-based numbers of their bad lines.

    A workload line is bad when it is blank, not JSON or not ``[hash, module]``. A record
    line is bad when it is blank, not JSON, malformed, or refers to a workload line that
    does not exist or is bad (TVM refers to workloads by line index and crashes on blank
    or malformed lines).
    """
    wl_lines = _read_lines(os.path.join(work_dir, WORKLOAD_FILE))
    rec_lines = _read_lines(os.path.join(work_dir, RECORD_FILE))
    bad_wl = [i for i, line in enumerate(wl_lines, 1) if not _is_workload(_parse(line))]
    bad_wl_set = {i - 1 for i in bad_wl}
    bad_rec = []
    for i, line in enumerate(rec_lines, 1):
        index = _record_index(_parse(line), len(wl_lines))
        if index is None or index in bad_wl_set:
            bad_rec.append(i)
    return wl_lines, rec_lines, bad_wl, bad_rec


def _with_newline(line: str) -> str:
    return line if line.endswith("\n") else line + "\n"


def check_database_files(work_dir: str, repair: bool = False) -> int:
    """Check the JSON database files of a work dir line by line, optionally repairing.

    An interrupted write leaves a truncated last line; a full disk, hand edits or two runs
    on one work dir can break any line. Nothing is ever deleted: ``repair`` backs each
    changed file up as ``<file>.bak`` and moves its bad lines to ``<file>.corrupt`` (blank
    lines are dropped). Records refer to workloads by line index, so when workload lines
    go, the indices of the records are renumbered to match; records of a bad workload
    line cannot be loaded and go to the record file's ``.corrupt`` too.

    Args:
        work_dir: The tuning work directory.
        repair: Move bad lines aside instead of raising.

    Returns:
        The number of lines moved aside or dropped (0 when the files are sound).

    Raises:
        DatabaseCorruptError: A file has bad lines and ``repair`` is false.
    """
    wl_lines, rec_lines, bad_wl, bad_rec = _bad_lines(work_dir)
    if not bad_wl and not bad_rec:
        return 0
    if not repair:
        name, bad = (WORKLOAD_FILE, bad_wl) if bad_wl else (RECORD_FILE, bad_rec)
        raise DatabaseCorruptError(
            f"{os.path.join(work_dir, name)}: {len(bad)} unreadable line(s) (first: line "
            f"{bad[0]}), e.g. from an interrupted write or a full disk; rerun with "
            f"--repair-db to move them to {name}.corrupt and keep every readable record"
        )
    bad_wl_set, bad_rec_set = set(bad_wl), set(bad_rec)
    new_index: dict[int, int] = {}
    for i in range(1, len(wl_lines) + 1):
        if i not in bad_wl_set:
            new_index[i - 1] = len(new_index)
    kept_records, renumbered = [], False
    for i, line in enumerate(rec_lines, 1):
        if i in bad_rec_set:
            continue
        index, body = json.loads(line)
        if new_index[index] != index:
            line = json.dumps([new_index[index], body]) + "\n"
            renumbered = True
        kept_records.append(_with_newline(line))
    changes = ((WORKLOAD_FILE, wl_lines, bad_wl,
                [_with_newline(ln) for i, ln in enumerate(wl_lines, 1) if i not in bad_wl_set]),
               (RECORD_FILE, rec_lines, bad_rec, kept_records))
    for name, lines, bad, kept in changes:
        if not bad and not (name == RECORD_FILE and renumbered):
            continue
        path = os.path.join(work_dir, name)
        shutil.copyfile(path, path + ".bak")
        moved = [_with_newline(lines[i - 1]) for i in bad if lines[i - 1].strip()]
        if moved:
            with open(path + ".corrupt", "a", encoding="utf-8") as f:
                f.writelines(moved)
        write_text_atomic(path, "".join(kept), fsync=True)
        logger.warning("%s: moved %d bad line(s) to %s.corrupt, dropped %d blank line(s)",
                       path, len(moved), name, len(bad) - len(moved))
    return len(bad_wl) + len(bad_rec)


def target_key(target) -> tuple[str | None, str | None]:
    """What makes two targets' timings comparable: the kind and the CPU (``mcpu``) or GPU
    architecture (``arch``) of a target's JSON (a record's, or ``Target.export()``: pass
    ``target.export()`` for a ``tvm.target.Target``)."""
    target = target if hasattr(target, "get") else {}
    cpu = target.get("mcpu") or target.get("arch")
    kind = target.get("kind")
    return (None if kind is None else str(kind)), (str(cpu) if cpu else None)


def describe_target(key: tuple[str | None, str | None]) -> str:
    """``llvm -mcpu=znver4`` for a :func:`target_key`."""
    kind, cpu = key
    return f"{kind or 'an unknown target'}" + (f" -mcpu={cpu}" if cpu else "")


def record_targets(work_dir: str) -> list[tuple[dict, int]]:
    """Each target the work dir's records were measured for, with how many records, in the
    order first met: the record's target JSON (``Target.export()``, as MetaSchedule writes
    it). Read from the record file without TVM (unreadable lines are the database check's);
    the one reader of records' targets (compare them with :func:`target_key`)."""
    counts: dict[str, list] = {}
    for line in _read_lines(os.path.join(work_dir, RECORD_FILE)):
        obj = _parse(line)
        if isinstance(obj, list) and len(obj) == 2 and isinstance(obj[1], list) \
                and len(obj[1]) == 4:
            target = obj[1][2] if isinstance(obj[1][2], dict) else {}
            entry = counts.setdefault(json.dumps(target, sort_keys=True), [target, 0])
            entry[1] += 1
    return [(target, n) for target, n in counts.values()]


def target_counts(work_dir: str) -> Counter:
    """How many of the work dir's records were measured for each :func:`target_key`."""
    counts: Counter = Counter()
    for target, n in record_targets(work_dir):
        counts[target_key(target)] += n
    return counts


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

    from tuner.engine.bf16_dot import register

    check_database_files(work_dir, repair=repair)
    register()  # a bf16 run's traces name its intrinsic: TVM reads them only once it is known
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
