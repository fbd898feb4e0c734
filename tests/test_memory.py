"""The tuning memory's store (issue 61): where it lives, one directory per CPU, target and TVM
version, appends without duplicates that survive a kill mid-write, and claims."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from metatune.errors import TuningMemoryError
from metatune.records import RECORD_FILE, WORKLOAD_FILE
from tuner.engine.memory import ENV_MEMORY, MachineMemory, MemoryKey, default_root, memory_root
from tuner.engine.memory_files import DatabaseFiles
from tuner.engine.memory_lock import Claim, Claims

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = {"keys": ["cpu"], "kind": "llvm", "mcpu": "znver4", "num-cores": 2, "tag": ""}


def key(cpu: str = "AMD EPYC", tvm: str = "0.27.0", cores: int = 2) -> MemoryKey:
    """A memory key without TVM (the target's JSON written out)."""
    return MemoryKey("llvm-znver4", json.dumps({**TARGET, "num-cores": cores}, sort_keys=True),
                     tvm, cpu)


def real_db(work_dir, n_workloads: int = 2, n_records: int = 3, scale: float = 1.0,
            first_split: int = 1) -> None:
    """A JSON database written by TVM: ``n_records`` records a workload, each its own trace
    (the loop split by ``2 ** first_split``, then twice that, ...), run times ``scale`` x
    1, 2, 3 ms."""
    import tvm
    from tvm import te
    from tvm.s_tir import Schedule
    from tvm.s_tir import meta_schedule as ms

    os.makedirs(work_dir, exist_ok=True)
    db = ms.database.JSONDatabase(work_dir=str(work_dir), module_equality="structural")
    for w in range(n_workloads):
        a = te.placeholder((16 * (w + 1),), name="A")
        b = te.compute(a.shape, lambda i: a[i] * 2.0, name="B")  # noqa: B023 (called at once)
        mod = tvm.IRModule({"main": te.create_prim_func([a, b])})
        workload = db.commit_workload(mod)
        for r in range(n_records):
            sch = Schedule(mod)
            (loop,) = sch.get_loops(sch.get_sblock("B"))
            sch.split(loop, [None, 2 ** (r + first_split)])
            db.commit_tuning_record(ms.database.TuningRecord(
                sch.trace, workload, [scale * 1e-3 * (r + 1)], tvm.target.Target(TARGET)))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A real database: 2 workloads x 3 records."""
    work = tmp_path_factory.mktemp("src")
    real_db(work)
    return str(work)


def items_of(directory: str) -> list[tuple[list, list]]:
    """``(workload line, record body)`` of every record of a database directory."""
    files = DatabaseFiles(directory)
    return [(files.workload_line(r.key), r.body) for r in files.refresh()]


def lines(directory: str, name: str) -> list[str]:
    with open(os.path.join(directory, name), encoding="utf-8") as f:
        return f.read().splitlines()


def test_the_location_is_the_path_else_the_environment_else_the_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_MEMORY, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert memory_root(None) == default_root() == str(tmp_path / "cache/metatune/memory")
    monkeypatch.setenv(ENV_MEMORY, str(tmp_path / "env"))
    assert memory_root(None) == str(tmp_path / "env")
    assert memory_root(str(tmp_path / "mine")) == str(tmp_path / "mine")
    monkeypatch.setenv(ENV_MEMORY, "off")
    assert memory_root(None) is None
    assert memory_root(str(tmp_path / "mine")) == str(tmp_path / "mine")  # named: used


def test_another_cpu_tvm_or_target_gets_its_own_directory_never_read(tmp_path, source,
                                                                       caplog):
    ours = MachineMemory.open(str(tmp_path), key())
    ours.add(items_of(source))
    others = [key(cpu="Intel Xeon"), key(tvm="0.28.0"), key(cores=4)]
    dirs = {MachineMemory.open(str(tmp_path), k).dir for k in others}
    assert len(dirs | {ours.dir}) == 4
    assert all(not os.path.exists(os.path.join(d, RECORD_FILE)) for d in dirs)
    assert os.path.basename(ours.dir).startswith("llvm-znver4-tvm0.27.0-")
    with open(os.path.join(ours.dir, "meta.json")) as f:
        meta = json.load(f)
    assert meta["measured_on"] == "AMD EPYC" and meta["tvm"] == "0.27.0" and meta["created"]
    caplog.set_level(logging.INFO)
    again = MachineMemory.open(str(tmp_path), key())
    again.log_opened()
    assert sum(again.files.counts.values()) == 6
    assert "3 other memories there" in caplog.text and "not read" in caplog.text


def test_a_directory_made_for_another_machine_is_refused(tmp_path):
    memory = MachineMemory.open(str(tmp_path), key())
    with open(os.path.join(memory.dir, "meta.json"), "w") as f:
        json.dump({**key().meta(), "measured_on": "Intel Xeon"}, f)  # copied in by hand
    with pytest.raises(TuningMemoryError, match="measured_on"):
        MachineMemory.open(str(tmp_path), key())


def test_appends_skip_what_the_memory_holds(tmp_path, source):
    memory = MachineMemory.open(str(tmp_path), key())
    assert memory.add(items_of(source)) == 6
    assert memory.add(items_of(source)) == 0  # the same workload and trace: not again
    assert len(lines(memory.dir, WORKLOAD_FILE)) == 2 and len(lines(memory.dir, RECORD_FILE)) == 6
    wl = json.loads(lines(source, WORKLOAD_FILE)[0])[0]
    assert [r.seconds for r in memory.best(wl)] == pytest.approx([1e-3, 2e-3, 3e-3])
    fresh = MachineMemory.open(str(tmp_path), key())  # another process reads the same
    assert fresh.known(wl) and len(fresh.best(wl, 2)) == 2


def test_a_line_cut_by_a_kill_is_skipped_and_the_next_append_is_whole(tmp_path, source):
    memory = MachineMemory.open(str(tmp_path), key())
    items = items_of(source)
    memory.add(items[:2])
    for name in (WORKLOAD_FILE, RECORD_FILE):  # what a process killed mid-write leaves
        with open(os.path.join(memory.dir, name), "a") as f:
            f.write('["123", "AAAA')
    other = MachineMemory.open(str(tmp_path), key())
    assert other.add(items) == 4  # after its own newline: the torn lines stay bad, alone
    fresh = MachineMemory.open(str(tmp_path), key())
    assert sum(fresh.files.counts.values()) == 6 and len(fresh.files.digests) == 6
    assert sum(k is None for k in fresh.files.keys) == 1  # the torn workload line
    from tvm.s_tir import meta_schedule as ms

    from tuner.engine.memory_view import MemoryView

    view = MemoryView(fresh)
    assert len(view) == 6 and len(view.get_all_tuning_records()) == 6
    assert isinstance(ms.database.OrderedUnionDatabase(view), ms.database.Database)


def test_the_view_skips_a_record_this_tvm_cannot_read(tmp_path, source):
    from tuner.engine.memory_view import MemoryView

    memory = MachineMemory.open(str(tmp_path), key())
    items = items_of(source)
    workload, body = items[0]
    bad = [[["not an instruction"]], [1e-6], *body[2:]]  # the fastest: first asked for
    memory.add([*items, (workload, bad)])
    view = MemoryView(memory)
    assert len(view.get_all_tuning_records()) == len(items)


APPENDER = """
import json, sys
from tuner.engine.memory import MachineMemory, MemoryKey
from tuner.engine.memory_files import DatabaseFiles
root, source, text = sys.argv[1], sys.argv[2], sys.argv[3]
memory = MachineMemory.open(root, MemoryKey(*json.loads(text)))
files = DatabaseFiles(source)
items = [(files.workload_line(r.key), r.body) for r in files.refresh()]
print("ready", flush=True)
for n in range(10 ** 6):  # every record again with another trace, one append each
    trace = [items[n % len(items)][1][0][0], [[0, n]]]
    memory.add([(items[n % len(items)][0], [trace, *items[n % len(items)][1][1:]])])
"""


def test_two_writers_and_a_kill_lose_no_record_and_write_none_twice(tmp_path, source):
    argv = [sys.executable, "-c", APPENDER, str(tmp_path), source,
            json.dumps([key().platform, key().target, key().tvm, key().measured_on])]
    procs = [subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    for p in procs:
        os.kill(p.pid, signal.SIGKILL)  # each dies wherever it is, mid-write or not
        p.wait()
    memory = MachineMemory.open(str(tmp_path), key())
    good, torn = [], 0
    for line in lines(memory.dir, RECORD_FILE):
        try:
            good.append(json.loads(line))
        except ValueError:
            torn += 1  # at most the line each process was writing when it died
    assert torn <= 2 and len(good) >= 10
    marks = [(g[0], json.dumps(g[1][0])) for g in good]
    assert len(marks) == len(set(marks))  # both wrote n = 0, 1, ...: each stored once
    assert sum(k is not None for k in memory.files.keys) == 2  # each workload once
    assert sum(memory.files.counts.values()) == len(good)  # every whole line is read


def test_claims_of_live_runs_hold_and_of_dead_ones_are_taken_over(tmp_path):
    claims = Claims(str(tmp_path), stale_after=60)
    me = Claim.mine("work/mine")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from tuner.engine.memory_lock import process_started

        deadline = time.time() + 5
        while process_started(sleeper.pid) is None and time.time() < deadline:
            time.sleep(0.05)
        live = Claim(sleeper.pid, socket.gethostname(), process_started(sleeper.pid), "w/a")
        assert claims.take(["1"], live) == {}
        assert claims.take(["1", "2"], me) == {"1": live}  # held: not taken
        assert claims.holder("2", live) == me
    finally:
        sleeper.kill()
        sleeper.wait()
    assert claims.holder("1", me) is None  # its process ended: stale
    assert claims.take(["1"], me) == {}  # taken over
    reused = Claim(os.getpid(), socket.gethostname(), 1.0, "w/old")  # a reused pid
    far = Claim(1, "another-host", 1.0, "w/far")
    claims.take(["3"], reused)
    claims.take(["4"], far)
    assert claims.holder("3", me) is None and claims.holder("4", me) == far
    old = time.time() - 120
    os.utime(os.path.join(claims.dir, "4.json"), (old, old))  # untouched for 2 minutes
    assert claims.holder("4", me) is None
    claims.release(["1", "2", "4"], me)  # ours go, another's stays
    assert sorted(os.listdir(claims.dir)) == ["3.json", "4.json"]


def test_no_memory_turns_it_off():
    import tune
    from tuner.app.config import load_tune_config

    path, dotlist = tune.parse_args(["--network", "alexnet", "--no-memory"])
    assert not load_tune_config(path, dotlist).memory.enabled
    assert load_tune_config(path, []).memory.enabled
