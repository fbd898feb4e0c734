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
        b = te.compute(a.shape, lambda i: a[i] * 2.0, name="B")  # noqa: B023 (called at once)
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


# --- issue 63: no file a user passes or the project caches runs code when read ---


class _Payload:
    """A crafted pickle: unpickling it would create ``marker`` (what an attacker's command
    would do)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _crafted(tmp_path, name: str = "evil.ckpt", blob=None) -> tuple[str, str]:
    """A ``torch.save`` file whose unpickling would run a command; (its path, the marker
    file the command would create)."""
    import torch

    marker = str(tmp_path / f"{name}.ran")
    path = str(tmp_path / name)
    torch.save(blob if blob is not None else {"hyper_parameters": {}, "state_dict": {},
                                              "x": _Payload(marker)}, path)
    return path, marker


def _refusal_is_one_line(message: str) -> None:
    assert "\n" not in message and "weights_only" not in message
    assert "nothing in it was run" in message


def test_a_crafted_checkpoint_passed_to_tune_runs_nothing(tmp_path, capsys):
    import tune

    path, marker = _crafted(tmp_path)
    code = tune.main(["--network", "alexnet", "--preset", "meta-BO", "--checkpoint", path,
                      "--work-dir", str(tmp_path / "w")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not os.path.exists(marker) and not (tmp_path / "w").exists()
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    _refusal_is_one_line(err)


def test_a_crafted_pretrained_checkpoint_passed_to_train_runs_nothing(tmp_path, capsys):
    import train

    path, marker = _crafted(tmp_path)
    code = train.main([f"data_dir={tmp_path / 'no-data'}", f"pretrained={path}",
                       f"out={tmp_path / 'out.ckpt'}", f"cache_dir={tmp_path / 'cache'}"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and not os.path.exists(marker) and len(err) == 1
    _refusal_is_one_line(err[0])
    assert not (tmp_path / "out.ckpt").exists()


def test_a_crafted_saved_cost_model_runs_nothing(tmp_path):
    from metatune.errors import CheckpointError
    from tuner.models.cost_model import MetaTuneCostModel
    from tuner.models.ensemble import EnsembleCostModel
    from tuner.models.trained import load_model

    path, marker = _crafted(tmp_path)
    single = MetaTuneCostModel(model=load_model(None, from_scratch=True))
    both = EnsembleCostModel(models=[load_model(None, from_scratch=True) for _ in range(2)],
                             graph=single.graph)
    for model in (single, both):
        with pytest.raises(CheckpointError) as caught:
            model.load(path)
        _refusal_is_one_line(str(caught.value))
    assert not os.path.exists(marker)


def test_a_saved_cost_model_with_graphs_loads_back(tmp_path):
    """What a cost model saves (task states holding PyG graphs) is read back with
    ``weights_only=True``: the safe loader allows the graph classes, nothing more."""
    import torch
    from torch_geometric.data import Data

    from tuner.models.cost_model import MetaTuneCostModel, TaskState
    from tuner.models.trained import load_model

    model = MetaTuneCostModel(model=load_model(None, from_scratch=True))
    graph = Data(x=torch.ones(2, 3), edge_index=torch.tensor([[0], [1]]))
    model.tasks[7] = TaskState([graph], [1e-3], None)
    model.save(str(tmp_path / "model.pt"))
    again = MetaTuneCostModel(model=load_model(None, from_scratch=True))
    again.load(str(tmp_path / "model.pt"))
    assert torch.equal(again.tasks[7].inputs[0].x, graph.x) and again.tasks[7].seconds == [1e-3]


def test_a_crafted_graph_cache_runs_nothing_and_is_rebuilt(tmp_path, caplog):
    """The encoded-dataset cache is plain data read with ``weights_only=True``: a crafted
    file in its place is refused (one warning line) and the split encoded again."""
    from metatune import dataset

    split = tmp_path / "train"
    split.mkdir()
    (split / "meta.json").write_text('{"workloads": []}')
    (split / "database_workload.json").write_text("")
    (split / "database_tuning_record.json").write_text("")
    key = dataset.split_fingerprint(str(split), f"super:{dataset.CACHE_FORMAT}",
                                    with_mtime=True)
    cache = tmp_path / "cache"
    cache.mkdir()
    path, marker = _crafted(cache, f"train-super-{key}.pt")
    with caplog.at_level("WARNING"):
        assert dataset.load_split(str(split), "super", str(cache)) == []
    assert not os.path.exists(marker)
    warned = [r.getMessage() for r in caplog.records if "cache" in r.getMessage()]
    assert len(warned) == 1
    _refusal_is_one_line(warned[0])
    assert dataset.load_split(str(split), "super", str(cache)) == []  # the rebuilt cache


def test_no_message_advises_loading_with_code_execution():
    """PyTorch's refusal suggests ``weights_only=False``; ours never repeats it."""
    import pickle

    from metatune.safe_load import load_error

    torch_text = ("Weights only load failed. In PyTorch 2.6, ... Re-running `torch.load` with "
                  "`weights_only` set to `False` will likely succeed, but it can result in "
                  "arbitrary code execution.\n\nTrying to load unsupported GLOBAL posix.system")
    message = load_error(pickle.UnpicklingError(torch_text))
    _refusal_is_one_line(message)
    assert "posix.system" in message


# --- issue 63: every input is checked before the work dir exists; foreign records ---

TINY = ["--model", "tests.models:tiny_convnet", "--input-shape", "8,16,16", "--preset", "xgb"]


def _tune(argv: list[str], capsys) -> tuple[int, list[str]]:
    import tune

    code = tune.main(argv)
    return code, [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


@pytest.mark.parametrize("bad", ["onnx-truncated", "onnx-op", "returns-dict", "syntax"])
def test_a_refused_model_leaves_no_work_dir(bad, tmp_path, capsys, monkeypatch):
    work = tmp_path / "w"
    (tmp_path / "broken_syntax.py").write_text("def model(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    if bad == "onnx-truncated":
        (tmp_path / "m.onnx").write_bytes(b"\x08\x07\x12\x07pytorch\x1a")
        args = ["--onnx", str(tmp_path / "m.onnx")]
    elif bad == "onnx-op":
        from tests.test_networks import _celu_onnx

        _celu_onnx(tmp_path / "m.onnx")
        args = ["--onnx", str(tmp_path / "m.onnx")]
    else:
        spec = "tests.models:not_a_module" if bad == "returns-dict" else "broken_syntax:model"
        args = ["--model", spec, "--input-shape", "8,16,16"]
    code, err = _tune([*args, "--preset", "xgb", "--work-dir", str(work)], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert not work.exists()


def test_a_refused_model_leaves_an_existing_work_dir_as_it_was(tmp_path, capsys):
    work = tmp_path / "w"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    code, err = _tune(["--model", "tests.models:not_a_module", "--preset", "xgb",
                       "--work-dir", str(work)], capsys)
    assert code == 2 and len(err) == 1
    assert sorted(os.listdir(work)) == ["notes.txt"]


def test_a_failure_after_the_work_dir_is_claimed_takes_back_what_it_made(tmp_path):
    from metatune.errors import ConfigError
    from tuner.engine.workdir_lock import claimed_work_dir

    new, old = tmp_path / "new", tmp_path / "old"
    old.mkdir()
    (old / "notes.txt").write_text("mine")
    for work in (new, old):
        with pytest.raises(ConfigError), claimed_work_dir(str(work)):
            (work / RECORD_FILE).write_text("")
            (work / "settings.json").write_text("{}")
            raise ConfigError("late")
    assert not new.exists() and sorted(os.listdir(old)) == ["notes.txt"]


def _records_for(work, mcpu: str, n: int) -> None:
    """``n`` record lines measured for ``llvm -mcpu=<mcpu>`` (what a database copied from
    another machine's work dir holds)."""
    target = {"keys": ["cpu"], "kind": "llvm", "mcpu": mcpu, "num-cores": 2, "tag": ""}
    work.mkdir(exist_ok=True)
    (work / WORKLOAD_FILE).write_text('["1", "AAAA"]\n')
    (work / RECORD_FILE).write_text("".join(
        json.dumps([0, [[[], []], [1e-3 * (i + 1)], target, []]]) + "\n" for i in range(n)))


def test_records_of_another_target_are_refused_in_one_line(tmp_path, capsys):
    work = tmp_path / "w"
    _records_for(work, "znver4", 24)
    before = {p: (work / p).read_text() for p in os.listdir(work)}
    code, err = _tune([*TINY, "--target", '{"kind": "llvm", "mcpu": "haswell"}',
                       "--trials", "32", "--work-dir", str(work)], capsys)
    assert code == 2 and len(err) == 1, err
    assert "24 of its 24 records measured for llvm -mcpu=znver4" in err[0]
    assert "llvm -mcpu=haswell" in err[0] and "--work-dir" in err[0]
    assert {p: (work / p).read_text() for p in os.listdir(work)} == before  # untouched


def test_record_targets_are_read_in_one_place(tmp_path):
    """tuner.engine.database.record_targets: each target with its count, in the order met
    (export compiles for the first); a blank or unreadable line is not counted."""
    from tuner.engine.database import record_targets, target_counts, target_key

    work = tmp_path / "w"
    _records_for(work, "znver4", 3)
    with open(work / RECORD_FILE, "a", encoding="utf-8") as f:
        f.write("\n{not json\n" + (work / RECORD_FILE).read_text().replace("znver4", "haswell"))
    targets = record_targets(str(work))
    assert [(t["mcpu"], n) for t, n in targets] == [("znver4", 3), ("haswell", 3)]
    assert target_counts(str(work)) == {("llvm", "znver4"): 3, ("llvm", "haswell"): 3}
    assert target_key(targets[0][0]) == ("llvm", "znver4")


def test_records_of_another_tvm_version_are_refused(tmp_path, capsys):
    from tuner.engine.targets import resolve_target

    work = tmp_path / "w"
    mcpu = str(resolve_target("llvm").target.attrs["mcpu"])
    _records_for(work, mcpu, 4)
    (work / "settings.json").write_text(json.dumps({
        "cost_model": "xgb", "search": "evolutionary", "graph": None,
        "target": {"kind": "llvm", "mcpu": mcpu}, "layout": "NHWC", "model": None,
        "tvm": "0.1.0"}))
    code, err = _tune([*TINY, "--work-dir", str(work)], capsys)
    assert code == 2 and len(err) == 1 and "TVM 0.1.0" in err[0], err


def test_tune_messages_come_without_a_torch_jit_warning(tmp_path):
    """PyG scripts two classes while it is imported and torch warns about torch.jit.script:
    silenced, so the one line of an error is the only line."""
    p = subprocess.run([sys.executable, "tune.py", "--network", "alexnet", "--preset",
                        "meta-BO", "--checkpoint", str(tmp_path / "none.ckpt"), "--work-dir",
                        str(tmp_path / "w")], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": ROOT})
    lines = [ln for ln in p.stderr.splitlines() if ln.strip() and " INFO " not in ln]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "jit" not in p.stderr and "Warning" not in p.stderr
