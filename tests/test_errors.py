"""Bad input gives one clear error saying what to do, and loses nothing measured."""

from __future__ import annotations

import json
import os

import pytest

import tune
from metatune.errors import (
    DatabaseCorruptError,
    ModelImportError,
    TargetUnavailableError,
    UnknownNetworkError,
    WorkDirError,
)
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


def test_user_models_get_the_same_weights_in_every_process():
    """Extraction, the final compile and a resumed run each build the model again."""
    from tuner.engine.networks import user_module

    a, b = (user_module("tests.models:unseeded_linear") for _ in range(2))
    assert all((p == q).all() for p, q in zip(a.parameters(), b.parameters(), strict=False))


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


@pytest.mark.parametrize("content, message", [
    (None, "cannot read config"), ("dir", "is a directory"), ("- 1\n- 2\n", "not a mapping"),
    ("trials: [1\n", "not valid YAML"),
])
def test_bad_config_file_is_one_line(content, message, capsys, tmp_path):
    path = tmp_path / "c.yaml"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    code = tune.main(["--network", "alexnet", "--config", str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err


@pytest.mark.parametrize("spec, message", [
    ("torch.nn:Conv2d", "without arguments failed"), ("math:pi", "not a callable"),
    ("tests.models:raises", "weights not found"),
])
def test_model_factories_that_fail(spec, message):
    with pytest.raises(ModelImportError, match=message):
        load_network(model_spec=spec)


@pytest.mark.parametrize("argv, message", [
    (["--network", "alexnet", "--input-shape", "3,a"], "--input-shape"),
    (["--network", "alexnet", "--seed", "-1"], "seed=-1"),
    (["--network", "alexnet", "--onnx", "m.onnx"], "give one network"),
    (["--model", "tests.models:tiny_convnet", "--network", "vgg-16"], "give one network"),
    (["--network", "alexnet", "--target", '{"kind": "llvm", "mcpu": "nonsense"}'],
     "not a CPU LLVM knows"),
    (["--network", "alexnet", "--checkpoint", "/nonexistent.ckpt"], "not found"),
    (["--network", "lenet"], "unknown network"),
    (["--network", "alexnet", "--preset", "XGB-xfer2"], "any case"),
    (["--network", "alexnet", "--rounds-per-task", "2", "--trials", "64"], "give one budget"),
])
def test_bad_input_stops_before_the_work_dir_exists(argv, message, capsys, tmp_path):
    work = tmp_path / "w"
    code = tune.main(argv + ["--work-dir", str(work), "evaluate.enabled=false"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err
    assert not work.exists()


def test_input_shape_accepts_brackets():
    _, dotlist = tune.parse_args(["--model", "m:f", "--input-shape", "[3, 224, 224]"])
    assert "input_shape=[3,224,224]" in dotlist


def test_collect_bad_number_is_one_line(capsys):
    import collect

    assert collect.main(["run", "train_samples=abc"]) == 2
    err = capsys.readouterr().err.strip()
    assert "train_samples" in err and "\n" not in err


def test_preset_and_cost_model_names_ignore_case():
    from tuner.app.config import load_tune_config

    cfg = load_tune_config(overrides=["preset=XGB-XFER"])
    assert (cfg.preset, cfg.cost_model, cfg.search) == ("xgb-Xfer", "xgb-xfer", "evolutionary")
    cfg = load_tune_config(overrides=["cost_model=XGB-Xfer", "search=Evolutionary"])
    assert (cfg.cost_model, cfg.search) == ("xgb-xfer", "evolutionary")


def test_resuming_with_another_preset_is_refused(tmp_path):
    from metatune.errors import ConfigError
    from tuner.app.config import load_tune_config
    from tuner.app.preflight import check_resume

    info = resolve_target("llvm")
    check_resume(str(tmp_path), load_tune_config(), info)  # a new work dir: recorded
    (tmp_path / RECORD_FILE).write_text("[0, []]\n")
    check_resume(str(tmp_path), load_tune_config(), info)  # same settings: resume
    with pytest.raises(ConfigError, match="preset meta-BO-T.*--work-dir"):
        check_resume(str(tmp_path), load_tune_config(overrides=["preset=xgb"]), info)
    with pytest.raises(ConfigError, match="layout=NHWC.*layout=NCHW"):
        check_resume(str(tmp_path), load_tune_config(overrides=["layout=NCHW"]), info)


def test_resuming_with_other_checkpoints_warns_and_records_them(tmp_path, caplog):
    import json

    from tuner.app.config import load_tune_config
    from tuner.app.preflight import SETTINGS_FILE, check_resume

    info = resolve_target("llvm")
    one = load_tune_config(overrides=["metatune.checkpoint=checkpoints/a.ckpt",
                                      "metatune.ensemble=[]"])
    pair = load_tune_config(overrides=["metatune.checkpoint=checkpoints/a.ckpt",
                                       "metatune.ensemble=[checkpoints/a-seed1.ckpt]"])
    check_resume(str(tmp_path), one, info)
    assert json.loads((tmp_path / SETTINGS_FILE).read_text())["model"] == ["checkpoints/a.ckpt"]
    (tmp_path / RECORD_FILE).write_text("[0, []]\n")
    with caplog.at_level("WARNING", logger="tuner.app.preflight"):
        check_resume(str(tmp_path), one, info)  # the same model: nothing to say
        assert not caplog.records
        check_resume(str(tmp_path), pair, info)  # resumes, says so, records the new model
    assert "checkpoints/a.ckpt + checkpoints/a-seed1.ckpt" in caplog.text
    assert "measurements made are kept" in caplog.text
    assert json.loads((tmp_path / SETTINGS_FILE).read_text())["model"] == [
        "checkpoints/a.ckpt", "checkpoints/a-seed1.ckpt"]


def test_the_recorded_model_names_xgb_xfers_data_whether_one_split_or_several():
    from tuner.app.config import load_tune_config
    from tuner.app.preflight import model_sources

    one = load_tune_config(overrides=["preset=xgb-Xfer", "xfer.data=data/a/train"])
    two = load_tune_config(overrides=["preset=xgb-Xfer", "xfer.data=[data/a/train,data/b/t]"])
    assert model_sources(one) == ["data/a/train"]
    assert model_sources(two) == ["data/a/train", "data/b/t"]
    assert model_sources(load_tune_config(overrides=["preset=xgb"])) is None


def test_a_work_dir_from_before_the_layout_was_recorded_resumes_as_nchw(tmp_path):
    import json

    from metatune.errors import ConfigError
    from tuner.app.config import load_tune_config
    from tuner.app.preflight import SETTINGS_FILE, check_resume

    info = resolve_target("llvm")
    check_resume(str(tmp_path), load_tune_config(overrides=["layout=NCHW"]), info)
    settings = json.loads((tmp_path / SETTINGS_FILE).read_text())
    del settings["layout"]  # as written before the layout was recorded
    (tmp_path / SETTINGS_FILE).write_text(json.dumps(settings))
    (tmp_path / RECORD_FILE).write_text("[0, []]\n")
    check_resume(str(tmp_path), load_tune_config(overrides=["layout=NCHW"]), info)
    with pytest.raises(ConfigError, match="layout=NCHW"):
        check_resume(str(tmp_path), load_tune_config(), info)  # the default is NHWC now
