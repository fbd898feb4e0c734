"""Faults (full disk, two runs, torn or malformed database lines, Ctrl-C, stale build
dirs) lose nothing and end with one line saying what to do (issue 16)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from metatune.errors import DatabaseCorruptError, WorkDirError
from tuner.engine.database import (
    RECORD_FILE,
    WORKLOAD_FILE,
    check_database_files,
    open_database,
)
from tuner.engine.durability import RecordFileGuard, as_write_error
from tuner.engine.workdir_lock import WorkDirLock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _real_db(work_dir, n_workloads: int = 2, n_records: int = 3) -> None:
    """A JSON database written by TVM itself: ``n_records`` records per workload."""
    import tvm
    from tvm import te
    from tvm.s_tir import Schedule
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.JSONDatabase(work_dir=str(work_dir), module_equality="structural")
    for w in range(n_workloads):
        a = te.placeholder((8 + w,), name="A")
        b = te.compute(a.shape, lambda i: a[i] * 2.0, name="B")
        mod = tvm.IRModule({"main": te.create_prim_func([a, b])})
        workload = db.commit_workload(mod)
        for r in range(n_records):
            db.commit_tuning_record(ms.database.TuningRecord(
                Schedule(mod).trace, workload, [1e-3 * (r + 1)], tvm.target.Target("llvm")))


def _lines(work_dir, name: str) -> list[str]:
    with open(os.path.join(work_dir, name)) as f:
        return f.read().splitlines()


def _secs_by_workload(database) -> list[tuple[int, float]]:
    """(workload argument length, run time) of every loaded record, sorted."""
    out = []
    for r in database.get_all_tuning_records():
        n = 8 if "(8,)" in r.workload.mod.script() else 9
        out.append((n, round(float(r.run_secs[0]), 6)))
    return sorted(out)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    work = tmp_path_factory.mktemp("db")
    _real_db(work)
    return work


@pytest.fixture
def db(pristine, tmp_path):
    for name in (WORKLOAD_FILE, RECORD_FILE):
        with open(pristine / name) as src, open(tmp_path / name, "w") as dst:
            dst.write(src.read())
    return tmp_path


ALL = [(8, 0.001), (8, 0.002), (8, 0.003), (9, 0.001), (9, 0.002), (9, 0.003)]


def test_blank_record_line_is_checked_and_repaired(db):
    lines = _lines(db, RECORD_FILE)
    (db / RECORD_FILE).write_text("\n".join(lines[:2] + [""] + lines[2:]) + "\n")
    with pytest.raises(DatabaseCorruptError, match="--repair-db"):
        open_database(str(db))  # TVM would segfault on the blank line
    assert _secs_by_workload(open_database(str(db), repair=True)) == ALL


def test_torn_unreferenced_workload_line_is_repaired(db):
    with open(db / WORKLOAD_FILE, "a") as f:
        f.write('["123", "2SsAAAAA')  # a run killed while writing a new workload
    with pytest.raises(DatabaseCorruptError, match="--repair-db"):
        check_database_files(str(db))
    assert _secs_by_workload(open_database(str(db), repair=True)) == ALL
    corrupt = (db / (WORKLOAD_FILE + ".corrupt")).read_text()
    assert corrupt == '["123", "2SsAAAAA\n'  # kept, with its newline


def test_malformed_workload_line_renumbers_the_records(db):
    wl = _lines(db, WORKLOAD_FILE)
    (db / WORKLOAD_FILE).write_text("\n".join(["[0]"] + wl) + "\n")
    recs = [json.loads(ln) for ln in _lines(db, RECORD_FILE)]
    (db / RECORD_FILE).write_text("".join(json.dumps([i + 1, r]) + "\n" for i, r in recs))
    assert check_database_files(str(db), repair=True) == 1
    assert _secs_by_workload(open_database(str(db))) == ALL
    assert (db / (WORKLOAD_FILE + ".bak")).exists()


def test_records_of_missing_or_bad_workloads_are_moved_aside(db):
    lines = _lines(db, RECORD_FILE)
    stray = json.dumps([7, json.loads(lines[0])[1]])  # workload index out of range
    (db / RECORD_FILE).write_text("\n".join(lines + [stray, "[1, 2]"]) + "\n")
    assert check_database_files(str(db), repair=True) == 2
    assert _secs_by_workload(open_database(str(db))) == ALL
    assert _lines(db, RECORD_FILE + ".corrupt") == [stray, "[1, 2]"]


def test_guard_stops_on_a_torn_round_and_keeps_what_is_on_disk(db):
    guard = RecordFileGuard(str(db))
    good = _lines(db, RECORD_FILE)
    with open(db / RECORD_FILE, "a") as f:  # a round of 2: one line written, one torn
        f.write(good[0] + "\n" + good[1][:40])
    with pytest.raises(WorkDirError, match=r"MiB free.*rerun the same command"):
        guard.observe(0, [None, None], [None, None])
    assert _lines(db, RECORD_FILE) == good + [good[0]]  # the torn tail is cut off
    assert len(open_database(str(db)).get_all_tuning_records()) == 7
    guard = RecordFileGuard(str(db))
    with open(db / RECORD_FILE, "a") as f:
        f.write(good[2] + "\n")
    guard.observe(0, [None], [None])  # a complete round passes


def test_write_errors_become_one_line(tmp_path):
    full = OSError(28, "No space left on device", str(tmp_path / "curves.jsonl"))
    assert "No space left" in str(as_write_error(full, str(tmp_path)))
    tvm_error = ValueError("Cannot open the file to write: x/database_tuning_record.json")
    assert isinstance(as_write_error(tvm_error, str(tmp_path)), WorkDirError)
    assert as_write_error(KeyError("x"), str(tmp_path)) is None


def test_second_run_on_a_work_dir_is_refused_until_the_first_dies(tmp_path):
    code = ("import sys, time; from tuner.engine.workdir_lock import WorkDirLock; "
            f"WorkDirLock({str(tmp_path)!r}).acquire(); print('locked', flush=True); "
            "time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(WorkDirError, match=f"in use by process {child.pid}"):
            WorkDirLock(str(tmp_path)).acquire()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with WorkDirLock(str(tmp_path)):  # the kernel dropped the dead process's lock
        assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())


def test_stale_build_dirs_are_removed(tmp_path):
    from tuner.engine.builder import clean_stale_build_dirs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"metatune-build-{dead.pid}-abc").mkdir()
    (tmp_path / f"metatune-build-{os.getpid()}-def").mkdir()
    old = tmp_path / "metatune-build-xyz12345"
    old.mkdir()
    os.utime(old, (time.time() - 86400,) * 2)
    assert clean_stale_build_dirs(str(tmp_path)) == 2
    assert os.listdir(tmp_path) == [f"metatune-build-{os.getpid()}-def"]


def test_stop_pool_ends_a_running_build_at_once():
    from tvm.support.popen_pool import PopenPoolExecutor

    from tuner.engine.builder import stop_pool

    pool = PopenPoolExecutor(max_workers=2, timeout=60)
    futures = [pool.submit(time.sleep, 30) for _ in range(4)]
    deadline = time.time() + 30
    procs: list = []
    while len(procs) < 2 and time.time() < deadline:
        time.sleep(0.2)
        procs = [w._proc for w in list(pool._worker_map.values()) if w._proc is not None]
    start = time.time()
    stop_pool(pool)
    assert time.time() - start < 10
    assert procs and all(p.poll() is not None for p in procs)
    assert all(f.done() for f in futures)


def test_interrupt_watch_remembers_ctrl_c():
    from tuner.engine.interrupt import InterruptWatch

    # As in a terminal, even when the suite itself runs with SIGINT ignored (background).
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        watch = InterruptWatch()
        with pytest.raises(KeyboardInterrupt), watch:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        assert watch.seen and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)
    with pytest.raises(KeyboardInterrupt):
        watch.observe(0, [], [])  # the next round stops even if the first was swallowed
