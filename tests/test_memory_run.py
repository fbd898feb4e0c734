"""A run's use of the tuning memory (issue 61): known tasks are not tuned and their records are
copied, the budget is the tuned tasks' share, a task another run is tuning is waited for,
and a second network tunes only what the first did not."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from tests.test_memory import ROOT, items_of, key, real_db
from tuner.app.config import load_tune_config
from tuner.app.memory_run import LEDGER_FILE, RunMemory, tuned_share
from tuner.engine.memory import MachineMemory


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A real database of 2 workloads x 3 records, and the workloads' modules."""
    from tvm.s_tir.meta_schedule.database import Workload

    from metatune.records import read_workload_json

    work = tmp_path_factory.mktemp("src")
    real_db(work)
    return str(work), [Workload.from_json(w).mod for w in read_workload_json(str(work))]


def _memory_with(root, source_dir: str, only: int | None = None) -> MachineMemory:
    """The memory at ``root`` holding the source's records (of workload ``only``)."""
    memory = MachineMemory.open(str(root), key())
    items = items_of(source_dir)
    if only is not None:
        items = [it for it in items if it[0] == items[only * 3][0]]
    memory.add(items)
    return memory


def _run(root, work, mods, *overrides: str) -> tuple[RunMemory, object]:
    """A started :class:`RunMemory` over ``mods`` with a fresh work dir database."""
    from tvm.s_tir import meta_schedule as ms

    cfg = load_tune_config(overrides=[f"memory.path={root}", "trials=32",
                                      "trials_per_round=2", *overrides])
    os.makedirs(work, exist_ok=True)
    database = ms.database.JSONDatabase(work_dir=str(work), module_equality="structural")
    run = RunMemory(MachineMemory.open(str(root), key()), cfg, ["a", "b"], mods, str(work),
                    json.dumps(json.loads(key().target)))
    run.start(database)
    return run, database


def test_no_memory_reads_and_writes_nothing(tmp_path, monkeypatch):
    from tuner.engine.targets import resolve_target

    off = load_tune_config(overrides=[f"memory.path={tmp_path / 'mem'}", "memory.enabled=false"])
    assert RunMemory.open(off, resolve_target("llvm"), [], None, str(tmp_path)) is None
    monkeypatch.setenv("METATUNE_MEMORY", "off")
    assert RunMemory.open(load_tune_config(), resolve_target("llvm"), [], None,
                          str(tmp_path)) is None
    assert not (tmp_path / "mem").exists()


def test_the_budget_is_the_tuned_tasks_share():
    assert tuned_share(128, 19, 19) == 128
    assert tuned_share(128, 4, 19) == 27  # ceil(128 * 4 / 19)
    assert tuned_share(128, 1, 19) == 7 and tuned_share(128, 0, 19) == 0


def test_a_known_task_is_not_tuned_its_best_records_copied_not_counted(tmp_path, source):
    from tuner.engine.database import measured_per_task

    _memory_with(tmp_path / "mem", source[0], only=0)
    run, database = _run(tmp_path / "mem", tmp_path / "w", source[1])
    assert run.known == {0} and run.skip == {0} and not run.claimed
    assert run.copied == 2  # the best trials_per_round
    secs = [float(r.run_secs[0]) for r in database.get_all_tuning_records()]
    assert secs == pytest.approx([1e-3, 2e-3])
    assert run.own_counts(measured_per_task(database, source[1])) == [0, 0]
    assert run.budget(32) == 16  # one of two tasks tuned
    with open(tmp_path / "w" / LEDGER_FILE) as f:
        assert len(json.load(f)["copied"][run.keys[0]]) == 2
    run.settle(database)
    summary = run.summary()
    assert summary["known_tasks"] == ["a"] and summary["trials_saved"] == 16
    again, database = _run(tmp_path / "mem", tmp_path / "w", source[1])  # the same work dir
    assert again.known == {0} and again.copied == 0  # nothing copied twice


def test_a_task_this_work_dir_measured_resumes_and_retune_tunes_known_ones(tmp_path, source):
    from tuner.engine.database import measured_per_task

    _memory_with(tmp_path / "mem", source[0])
    real_db(tmp_path / "w", n_workloads=1, scale=0.5, first_split=4)  # it measured task a
    run, database = _run(tmp_path / "mem", tmp_path / "w", source[1])
    assert run.known == {1} and run.budget(32) == 16  # a resumes (raise --trials: it tunes)
    assert run.own_counts(measured_per_task(database, source[1])) == [3, 0]
    memory = MachineMemory.open(str(tmp_path / "mem"), key())
    assert sum(memory.files.counts.values()) == 9  # the work dir's own went to the memory
    run.release()
    retune, database = _run(tmp_path / "mem", tmp_path / "w2", source[1], "memory.retune=true")
    assert retune.known == set() and retune.budget(32) == 32 and retune.copied == 4
    assert retune.own_counts(measured_per_task(database, source[1])) == [0, 0]
    retune.release()


def _full(path, obj, **kwargs):
    import errno

    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def test_a_ledger_that_cannot_be_written_copies_nothing(tmp_path, source, monkeypatch, caplog):
    """memory.json cannot be written: the memory is off for the run and nothing is copied,
    so the next run does not count copies as its own measurements."""
    from types import SimpleNamespace

    from tuner.engine.database import measured_per_task

    _memory_with(tmp_path / "mem", source[0], only=0)
    monkeypatch.setattr("tuner.app.memory_run.memory_key", lambda target, on: key())
    monkeypatch.setattr("tuner.app.memory_run.write_json_atomic", _full)
    work, database = tmp_path / "w", None
    work.mkdir()
    from tvm.s_tir import meta_schedule as ms

    database = ms.database.JSONDatabase(work_dir=str(work), module_equality="structural")
    tasks = [SimpleNamespace(name=n, extracted=SimpleNamespace(dispatched=[m]))
             for n, m in zip(["a", "b"], source[1], strict=True)]
    cfg = load_tune_config(overrides=[f"memory.path={tmp_path / 'mem'}", "trials=32",
                                      "trials_per_round=2"])
    target = SimpleNamespace(target=json.dumps(json.loads(key().target)))
    assert RunMemory.open(cfg, target, tasks, database, str(work)) is None
    assert "No space left on device" in caplog.text and "tunes without it" in caplog.text
    assert database.get_all_tuning_records() == [] and not (work / LEDGER_FILE).exists()
    assert not os.listdir(os.path.join(str(tmp_path / "mem"), os.listdir(
        tmp_path / "mem")[0], "claims"))  # its claims released
    monkeypatch.undo()  # the disk has room again: the next run copies, and knows they are
    run, database = _run(tmp_path / "mem", work, source[1])
    assert run.known == {0} and run.copied == 2
    assert run.own_counts(measured_per_task(database, source[1])) == [0, 0]
    run.release()


def test_a_ledger_that_cannot_be_written_at_the_end_copies_nothing(tmp_path, source,
                                                                   monkeypatch, caplog):
    other = _other_run(tmp_path, source[0], hold=0.5)
    run, database = _run(tmp_path / "mem", tmp_path / "w", source[1])
    assert set(run.claimed) == {0}
    monkeypatch.setattr("tuner.app.memory_run.write_json_atomic", _full)
    run.settle(database)
    other.wait()
    assert run.copied == 0 and database.get_all_tuning_records() == []
    assert run.summary()["unsettled"] == ["a"]
    assert "cannot write the work dir's memory.json (No space left on device)" in caplog.text


TUNER = """
import sys, time
from tuner.engine.memory import MachineMemory
from tuner.engine.memory_lock import Claim, locked
from tests.test_memory import items_of, key
root, source, hold, early = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
memory = MachineMemory.open(root, key())
items = items_of(source)
me = Claim.mine("work/other")
with locked(memory.dir):
    memory.claims.take([items[0][0][0]], me)
memory.add(items[:early])  # a first round of the task, the claim still held
print("claimed", flush=True)
time.sleep(hold)
memory.add(items[:3])  # its records of the task, then the claim goes
with locked(memory.dir):
    memory.claims.release([items[0][0][0]], me)
"""


def _other_run(tmp_path, source_dir: str, hold: float, early: int = 0) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", TUNER, str(tmp_path / "mem"), source_dir,
                             str(hold), str(early)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "claimed"
    return proc


@pytest.mark.parametrize("early", [0, 1], ids=["no-round-yet", "a-round-in-the-memory"])
def test_a_task_another_run_tunes_is_waited_for_not_measured_twice(tmp_path, source, caplog,
                                                                    early):
    # with a round of it already in the memory, the task is still the other run's (not
    # known): this run waits for its end instead of compiling its first round
    other = _other_run(tmp_path, source[0], hold=2.0, early=early)
    caplog.set_level(logging.INFO)
    run, database = _run(tmp_path / "mem", tmp_path / "w", source[1])
    assert set(run.claimed) == {0} and run.skip == {0} and run.mine == [run.keys[1]]
    assert "is being tuned by pid" in caplog.text
    run.settle(database)  # releases its own claim, then waits for task a's
    other.wait()
    assert run.waited >= 0.5 and "waiting for 1 task(s)" in caplog.text
    assert run.copied == 2 and run.summary()["unsettled"] == []
    assert len(database.get_all_tuning_records()) == 2
    assert not os.listdir(os.path.join(run.memory.dir, "claims"))  # every claim released


def test_waiting_is_bounded_then_it_compiles_with_what_there_is(tmp_path, source, caplog):
    other = _other_run(tmp_path, source[0], hold=30.0)
    try:
        run, database = _run(tmp_path / "mem", tmp_path / "w", source[1],
                             "memory.wait_seconds=1")
        run.settle(database)
        assert 1.0 <= run.waited < 10 and run.summary()["unsettled"] == ["a"]
        assert "stopped waiting after 1 s" in caplog.text
    finally:
        other.kill()
        other.wait()


def _nets(tmp_path, monkeypatch) -> None:
    """Two networks on the path: ``one`` (a conv) and ``two`` (the same conv, then another)."""
    (tmp_path / "memnets.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "def one():\n    torch.manual_seed(0)\n"
        "    return nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU()).eval()\n\n"
        "def two():\n    torch.manual_seed(0)\n"
        "    return nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),\n"
        "                         nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()).eval()\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def _tune(tmp_path, net: str, work: str, *extra: str) -> dict:
    from tuner.app.run import run_tune

    return run_tune(load_tune_config(overrides=[
        "network=null", f"model=memnets:{net}", "input_shape=[8,16,16]", "layout=NCHW",
        f"work_dir={tmp_path / work}", f"memory.path={tmp_path / 'mem'}", "trials=8",
        "trials_per_round=4", "cost_model=random", "search=replay",
        "runner.min_repeat_ms=10", "evaluate.enabled=false", "progress=false",
        "tensorboard=false", "log_level=WARNING", "memory.transfer=false", *extra]))


def _compiled_from_memory(tmp_path, caplog) -> None:
    """``torch.compile(backend="metatune")`` of ``one`` with the memory alone: scheduled."""
    import memnets
    import torch

    torch._dynamo.reset()
    model, x = memnets.one(), torch.randn(1, 8, 16, 16)
    options = {"memory": str(tmp_path / "mem"), "layout": "NCHW"}
    with caplog.at_level(logging.INFO, logger="tuner.app.dynamo"), torch.no_grad():
        out = torch.compile(model, backend="metatune", options=options)(x)
        assert torch.allclose(out, model(x), rtol=1e-4, atol=1e-5)
    assert "1 of 1 functions scheduled from the tuning memory" in caplog.text
    torch._dynamo.reset()


@pytest.mark.slow
def test_a_second_network_tunes_only_the_tasks_the_first_did_not(tmp_path, monkeypatch,
                                                                   caplog):
    _nets(tmp_path, monkeypatch)
    first = _tune(tmp_path, "one", "one")
    assert first["trials_run"] == 8 and first["memory"]["records_added"] == 8
    _compiled_from_memory(tmp_path, caplog)
    second = _tune(tmp_path, "two", "two", "trials=16")
    memory = second["memory"]
    assert memory["tasks"] == 2 and memory["known"] == 1 and memory["budget"] == 8
    assert 1 <= second["trials_run"] <= 8 and memory["trials_saved"] == 8  # 8, or fewer new
    assert [t["trials"] for t in second["tasks"]].count(0) == 1  # the known task: none
    assert all(t["schedule"] == "measured" for t in second["tasks"])  # copied: compiled
    again = _tune(tmp_path, "two", "two", "trials=16")  # the same command: nothing to do
    assert again["trials_run"] == 0 and again["memory"]["known"] == 1


def test_new_tasks_transfer_from_the_memory_and_the_datasets(tmp_path, source):
    from tvm.s_tir import meta_schedule as ms

    from tuner.engine.targets import resolve_target
    from tuner.search.transfer_search import TransferSearch

    _memory_with(tmp_path / "mem", source[0], only=0)
    run, _ = _run(tmp_path / "mem", tmp_path / "w", source[1])
    wrapped = run.with_transfer(ms.search_strategy.ReplayTrace(), resolve_target("llvm").target,
                                "NHWC")
    assert isinstance(wrapped, TransferSearch) and run.tally is not None
    dirs = [getattr(s, "split_dir", None) for s in wrapped.provider.sources]
    assert dirs[0] == run.memory.dir and len(dirs) > 1  # the memory first, then the datasets
    run.release()
    off, _ = _run(tmp_path / "mem", tmp_path / "w2", source[1], "memory.transfer=false")
    search = ms.search_strategy.ReplayTrace()
    assert off.with_transfer(search, resolve_target("llvm").target, "NHWC") is search
    off.release()
