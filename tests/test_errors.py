"""Bad input gives one clear error saying what to do, and loses nothing measured."""

from __future__ import annotations

import json
import os

import pytest

import tune
from metatune.errors import (DatabaseCorruptError, ModelImportError, TargetUnavailableError,
                             UnknownNetworkError, WorkDirError)
from tuner.engine.database import RECORD_FILE, WORKLOAD_FILE, check_database_files, ensure_work_dir
from tuner.engine.networks import load_network
from tuner.engine.targets import resolve_target


def test_unknown_network_lists_choices():
    with pytest.raises(UnknownNetworkError, match="alexnet, resnet-18, vgg-16, squeezenet"):
        load_network("resnet-1000")


def test_unreadable_onnx(tmp_path):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"this is not protobuf")
    with pytest.raises(ModelImportError, match="not a readable ONNX model"):
        load_network(onnx_path=str(bad))
    with pytest.raises(ModelImportError, match="no such file"):
        load_network(onnx_path=str(tmp_path / "missing.onnx"))


def test_bad_model_spec():
    with pytest.raises(ModelImportError, match="module:callable"):
        load_network(model_spec="tests.models")
    with pytest.raises(ModelImportError, match="cannot import"):
        load_network(model_spec="tests.models:nope")
    with pytest.raises(ModelImportError, match="not a torch.nn.Module"):
        load_network(model_spec="tests.models:not_a_module")


@pytest.mark.parametrize("name", ["opencl", "{not json", '{"kind": "vulkan"}'])
def test_unknown_target(name):
    with pytest.raises(TargetUnavailableError):
        resolve_target(name)


@pytest.mark.parametrize("kind", ["cuda", "rocm"])
def test_gpu_target_without_device(kind):
    import tvm

    if tvm.runtime.enabled(kind) and tvm.device(kind, 0).exist:
        pytest.skip(f"this machine has a {kind} device")
    with pytest.raises(TargetUnavailableError, match=kind):
        resolve_target(kind)


def test_unwritable_work_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(WorkDirError, match="--work-dir"):
        ensure_work_dir(str(blocker / "sub"))


def _write_db(work_dir, records: list[str]) -> None:
    os.makedirs(work_dir, exist_ok=True)
    with open(os.path.join(work_dir, WORKLOAD_FILE), "w") as f:
        f.write(json.dumps(["0", "e30="]) + "\n")
    with open(os.path.join(work_dir, RECORD_FILE), "w") as f:
        f.writelines(r + "\n" for r in records)


def test_corrupt_database_is_reported_then_repaired_without_loss(tmp_path):
    good = [json.dumps([0, [[], [0.001], {}, []]]) for _ in range(3)]
    _write_db(tmp_path, [good[0], good[1], '[0, [[], [0.0', good[2]])
    with pytest.raises(DatabaseCorruptError, match="--repair-db"):
        check_database_files(str(tmp_path))
    assert check_database_files(str(tmp_path), repair=True) == 1
    with open(tmp_path / RECORD_FILE) as f:
        assert f.read().splitlines() == good
    assert (tmp_path / (RECORD_FILE + ".corrupt")).read_text().strip() == '[0, [[], [0.0'
    assert (tmp_path / (RECORD_FILE + ".bak")).exists()
    assert check_database_files(str(tmp_path)) == 0


@pytest.mark.parametrize("argv, message", [
    (["--network", "lenet"], "unknown network"),
    (["--trials", "0"], "positive"),
    (["--target", "opencl"], "unknown target"),
])
def test_cli_prints_one_line_error(argv, message, capsys, tmp_path):
    code = tune.main(argv + ["--work-dir", str(tmp_path / "w"), "evaluate.enabled=false"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_cli_corrupt_database(capsys, tmp_path):
    _write_db(tmp_path, ["{broken"])
    code = tune.main(["--network", "alexnet", "--work-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "--repair-db" in err
    assert (tmp_path / RECORD_FILE).read_text() == "{broken\n"  # untouched
