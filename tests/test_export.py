"""Export: a tuned work dir becomes a directory that runs with ``tvm.runtime`` and numpy alone,
computes what PyTorch computes, and is refused cleanly where there is nothing to export."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from metatune.deploy import ARTIFACT_FORMAT
from tuner.app.artifact import LOAD_SNIPPET
from tuner.app.config import load_tune_config
from tuner.app.run import run_tune
from tuner.engine.database import RECORD_FILE

#: Run in a fresh interpreter: the manifest's snippet as it is, then the artifact on a given
#: input. torch, metatune and tuner cannot be imported there (as where only TVM is
#: installed: ``import tvm`` imports torch itself when it can), and none may be loaded after.
CHILD = r'''
import sys

class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "metatune", "tuner"):
            raise ImportError(f"{name} is not installed here")
        return None

sys.meta_path.insert(0, _Absent())
artifact, x_path, y_path = sys.argv[1:4]
import json
snippet = json.load(open(f"{artifact}/manifest.json"))["load_snippet"]
scope = {}
exec(snippet.replace('"alexnet.metatune"', repr(artifact)), scope)
m, vm, dev, y = scope["m"], scope["vm"], scope["dev"], scope["y"]
assert list(y.shape) == m["outputs"][0]["shape"], (y.shape, m["outputs"])
import numpy as np
import tvm
out = vm[m["function"]](tvm.runtime.tensor(np.load(x_path), dev))
np.save(y_path, (out[0] if m["output_tuple"] else out).numpy())
loaded = [k for k in sys.modules if k.split(".")[0] in ("torch", "metatune", "tuner")]
assert 'torch' not in sys.modules and 'metatune' not in sys.modules \
    and 'tuner' not in sys.modules, loaded
print("ok")
'''


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One short tuning run of the tiny conv net with ``--export``: (work dir, artifact)."""
    root = tmp_path_factory.mktemp("export")
    work, artifact = root / "work", root / "tiny.metatune"
    overrides = [
        "network=null", "model=tests.models:tiny_convnet", "input_shape=[8,16,16]",
        f"work_dir={work}", "trials=8", "trials_per_round=8", "preset=xgb",
        "search_params.population_size=32", "search_params.init_min_unmeasured=8",
        "runner.min_repeat_ms=10", "evaluate.enabled=false", "progress=false",
        "tensorboard=false", "log_level=WARNING", f"export={artifact}",
    ]
    run_tune(load_tune_config(overrides=overrides))
    return work, artifact


def _manifest(artifact) -> dict:
    with open(os.path.join(artifact, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def _export(capsys, *args: str) -> tuple[int, str, str]:
    import export

    code = export.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_tune_export_writes_a_checked_artifact_with_provenance(tuned):
    work, artifact = tuned
    assert sorted(os.listdir(artifact)) == ["manifest.json", "model.so"]
    m = _manifest(artifact)
    assert m["format"] == ARTIFACT_FORMAT and m["library"] == "model.so"
    assert m["function"] == "main" and m["device"] == "cpu" and m["output_tuple"] is True
    assert m["inputs"] == [{"name": "input", "shape": [1, 8, 16, 16], "dtype": "float32"}]
    assert m["outputs"] == [{"shape": [1, 16, 16, 16], "dtype": "float32"}]
    assert m["target_json"]["kind"] == "llvm" and m["check_error"] < 1e-4
    assert m["load_snippet"] == LOAD_SNIPPET
    p = m["provenance"]
    with open(os.path.join(work, RECORD_FILE), encoding="utf-8") as f:
        assert p["records"] == sum(1 for line in f if line.strip()) >= 1
    assert p["work_dir"] == str(work) and p["preset"] == "xgb" and p["layout"] == "NHWC"
    assert p["source"]["model"] == "tests.models:tiny_convnet"
    assert p["exported_on"]["cpu"] and p["tvm"] and "date" in p


def test_exported_network_runs_without_torch_or_metatune_and_matches_pytorch(
        tuned, tmp_path, capsys):
    """export.py rebuilds the network from the work dir alone; a fresh interpreter that
    cannot import torch or MetaTune runs it and gets PyTorch's output of the same model."""
    import torch

    from tests.models import tiny_convnet

    work, _ = tuned
    artifact = tmp_path / "again.metatune"
    code, out, err = _export(capsys, "--work-dir", str(work), "--out", str(artifact))
    assert code == 0, err
    assert "output checked" in out and str(artifact) in out
    x = np.random.default_rng(1).standard_normal((1, 8, 16, 16)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(artifact), str(tmp_path / "x.npy"),
         str(tmp_path / "y.npy")], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120)
    assert child.returncode == 0 and child.stdout.strip() == "ok", child.stderr[-2000:]
    with torch.no_grad():
        expected = tiny_convnet()(torch.from_numpy(x)).numpy()
    actual = np.load(tmp_path / "y.npy")
    assert actual.shape == expected.shape
    assert np.max(np.abs(actual - expected)) / np.max(np.abs(expected)) < 1e-4


def test_export_refuses_what_it_cannot_export_in_one_line(tuned, tmp_path, capsys):
    work, artifact = tuned
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        ((str(tmp_path / "missing"),), "does not exist"),
        ((str(empty),), "has no tuning records"),
    ]
    for (work_dir,), words in cases:
        code, _, err = _export(capsys, "--work-dir", work_dir, "--out", str(tmp_path / "o"))
        assert code == 2 and words in err and err.strip().count("\n") == 0, err
    code, _, err = _export(capsys, "--work-dir", str(work), "--out", str(artifact))
    assert code == 2 and "--overwrite" in err and err.strip().count("\n") == 0, err
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    code, _, err = _export(capsys, "--work-dir", str(work), "--out", str(other),
                           "--overwrite")
    assert code == 2 and "not a MetaTune artifact" in err
    assert (other / "keep.txt").read_text() == "mine" and not (tmp_path / "o").exists()


def test_overwrite_replaces_an_artifact(tuned, tmp_path, capsys):
    work, _ = tuned
    artifact = tmp_path / "a.metatune"
    artifact.mkdir()
    (artifact / "manifest.json").write_text(json.dumps({"format": ARTIFACT_FORMAT}))
    (artifact / "stale.txt").write_text("old")
    code, _, err = _export(capsys, "--work-dir", str(work), "--out", str(artifact),
                           "--overwrite", "--no-check")
    assert code == 0, err
    assert sorted(os.listdir(artifact)) == ["manifest.json", "model.so"]
    assert _manifest(artifact)["check_error"] is None
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".a.metatune")]


def test_tune_refuses_an_export_path_in_the_way_before_tuning(tuned, tmp_path, capsys):
    import tune

    _, artifact = tuned
    work = tmp_path / "work"
    code = tune.main(["--model", "tests.models:tiny_convnet", "--input-shape", "8,16,16",
                      "--work-dir", str(work), "--preset", "xgb", "--export", str(artifact)])
    err = capsys.readouterr().err
    assert code == 2 and "export_overwrite=true" in err and not work.exists()


def test_a_cross_target_is_built_for_its_triple(tuned, tmp_path, capsys):
    """A work dir tuned for another CPU triple (over RPC) exports that triple's objects,
    linked on the device by ``tvm.runtime.load_module``; it is not run here."""
    import shutil
    import tarfile

    work, _ = tuned
    cross = tmp_path / "cross"
    shutil.copytree(work, cross)
    with open(cross / "report.json", encoding="utf-8") as f:
        report = json.load(f)
    report["config"]["target"] = json.dumps({"kind": "llvm", "mtriple": "aarch64-linux-gnu",
                                             "mcpu": "cortex-a72", "num-cores": 4})
    (cross / "report.json").write_text(json.dumps(report))
    artifact = tmp_path / "pi.metatune"
    code, _, err = _export(capsys, "--work-dir", str(cross), "--out", str(artifact))
    assert code == 0, err
    m = _manifest(artifact)
    assert m["library"] == "model.tar" and m["check_error"] is None
    assert m["target_json"]["mtriple"] == "aarch64-linux-gnu"
    with tarfile.open(artifact / "model.tar") as tar:
        names = tar.getnames()
        assert names and all(n.endswith(".o") for n in names)
        header = tar.extractfile(names[0]).read(20)
    assert header[:4] == b"\x7fELF" and header[18:20] == (183).to_bytes(2, "little")  # aarch64



def test_the_artifact_is_timed_here(tuned):
    from tuner.app.artifact_timing import time_artifact

    _, artifact = tuned
    here = time_artifact(str(artifact), repeat=3, min_repeat_ms=10)
    assert here["where"] == "local" and len(here["runs_ms"]) == 3 and here["median_ms"] > 0


@pytest.mark.slow
def test_export_time_on_an_rpc_server(tuned, tmp_path, capsys):
    """--time over RPC: the server loads the uploaded library and times it (one TVM thread);
    the latency lands in the manifest. Slow: a tracker and a server start (~30 s)."""
    from bench.rpc_farm import local_farm

    work, _ = tuned
    out = tmp_path / "timed.metatune"
    with local_farm(1, key="metatune-export-test", threads=1) as farm:
        rpc = farm.rpc
        code, printed, err = _export(
            capsys, "--work-dir", str(work), "--out", str(out), "--no-check", "--time",
            "--runner", "rpc", "--tracker", f"{rpc.tracker_host}:{rpc.tracker_port}",
            "--key", rpc.key)
    assert code == 0, err
    timing = _manifest(out)["timing"]
    assert timing["where"] == f"rpc {rpc.key}@{rpc.tracker_host}:{rpc.tracker_port}"
    assert len(timing["runs_ms"]) == 10 and timing["median_ms"] > 0  # evaluate.repeat
    assert "latency" in printed and "rpc" in printed


def test_export_time_without_an_rpc_server_is_one_line(tuned, tmp_path, capsys):
    from bench.rpc_farm import free_port

    work, _ = tuned
    code, _, err = _export(capsys, "--work-dir", str(work), "--out", str(tmp_path / "t"),
                           "--no-check", "--time", "--runner", "rpc", "--tracker",
                           f"127.0.0.1:{free_port()}")
    assert code == 2 and "no RPC tracker answers" in err and not (tmp_path / "t").exists()
    assert err.strip().count("\n") == 0, err


def test_metatune_load_sizes_tvm_pool_from_the_target_in_a_fresh_process(tuned, tmp_path):
    """TVM's own default is half the hardware threads (one on a 2-core machine without
    SMT): ``metatune.load`` gives the pool the target's cores unless the user set
    ``TVM_NUM_THREADS``."""
    from metatune.tvm_env import host_num_cores

    _, artifact = tuned
    cores = _manifest(artifact)["target_json"]["num-cores"]
    code = ("import sys, metatune, tvm; metatune.load(sys.argv[1]); "
            "print(tvm.runtime.num_threads())")
    env = {k: v for k, v in os.environ.items() if k != "TVM_NUM_THREADS"}
    for extra, want in (({}, min(cores, host_num_cores())), ({"TVM_NUM_THREADS": "1"}, 1)):
        child = subprocess.run([sys.executable, "-c", code, str(artifact)], cwd=tmp_path,
                               env={**env, **extra}, capture_output=True, text=True,
                               timeout=120)
        assert child.returncode == 0, child.stderr[-2000:]
        assert int(child.stdout.strip().splitlines()[-1]) == want
