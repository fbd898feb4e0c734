"""torch.compile(backend="metatune") and metatune.load: torch tensors in and out, outputs equal
to eager PyTorch, the tuning database's schedules applied, and a clear fall-back to PyTorch."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import subprocess
import sys
import warnings

import pytest
import torch

from tests.models import tiny_classifier, tiny_convnet
from tuner.app.dynamo import ENV_WORK_DIR, FallbackWarning

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_SHAPE = (1, 8, 16, 16)


@pytest.fixture(autouse=True)
def _fresh_dynamo(monkeypatch):
    """Each test compiles anew, with no work dir from the environment."""
    monkeypatch.delenv(ENV_WORK_DIR, raising=False)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A work dir of the tiny conv net, 6 trials measured (NHWC, tune.py's default)."""
    from tuner.app.config import load_tune_config
    from tuner.app.run import run_tune

    work = tmp_path_factory.mktemp("dynamo-tune")
    run_tune(load_tune_config(overrides=[
        "network=null", "model=tests.models:tiny_convnet", "input_shape=[8,16,16]",
        f"work_dir={work}", "trials=6", "trials_per_round=6", "cost_model=random",
        "search=replay", "runner.min_repeat_ms=10", "evaluate.enabled=false", "tensorboard=false",
        "progress=false", "log_level=WARNING"]))
    return str(work)


def _run(model, x, **compile_kwargs):
    """(compiled output, eager output, FallbackWarnings raised while compiling and running)."""
    compiled = torch.compile(model, backend="metatune", **compile_kwargs)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        out = compiled(x)
        expected = model(x)
    return out, expected, [w for w in caught if issubclass(w.category, FallbackWarning)]


def _close(actual, expected, rtol=1e-4):
    """Relative max error (to the largest reference magnitude) within ``rtol``."""
    scale = float(expected.abs().max()) or 1.0
    return float((actual - expected).abs().max()) / scale <= rtol


def test_compiled_with_the_database_equals_eager(tuned, caplog):
    x = torch.randn(*TINY_SHAPE)
    with caplog.at_level(logging.INFO, logger="tuner.app.dynamo"):
        out, expected, caught = _run(tiny_convnet(), x, options={"work_dir": tuned})
    assert not caught, [str(w.message) for w in caught]
    assert isinstance(out, torch.Tensor) and out.shape == expected.shape
    assert _close(out, expected)
    # every fused function of the graph found its tuned schedule (NHWC, from settings.json)
    assert "3 of 3 functions scheduled" in caplog.text and "layout NHWC" in caplog.text


def test_an_unaligned_numpy_backed_input_is_taken(tuned):
    """A ``torch.from_numpy`` tensor whose data is not 64-byte aligned (TVM's DLPack import
    refuses those) is copied, not refused."""
    import numpy as np

    n = int(np.prod(TINY_SHAPE))
    x = torch.from_numpy(np.random.default_rng(0).random(n + 1, dtype=np.float32)[1:]
                         .reshape(TINY_SHAPE))
    assert x.data_ptr() % 64
    out, expected, caught = _run(tiny_convnet(), x, options={"work_dir": tuned})
    assert not caught, [str(w.message) for w in caught]
    assert _close(out, expected)


def test_work_dir_from_the_environment(tuned, monkeypatch, caplog):
    monkeypatch.setenv(ENV_WORK_DIR, tuned)
    x = torch.randn(2, 8, 16, 16)  # another batch: its functions are not in the database
    with caplog.at_level(logging.INFO, logger="tuner.app.dynamo"):
        out, expected, caught = _run(tiny_convnet(), x)
    assert _close(out, expected)
    assert f"scheduled from {tuned}" in caplog.text
    assert len(caught) <= 1 and all("none of this graph" in str(w.message) for w in caught)


def _same_tasks_as_tune_py(model, network) -> None:
    """Assert that ``model`` captured by Dynamo lowers to the tasks tune.py extracts from
    ``network`` (the same model loaded by tune.py): names, weights, workloads."""
    from tvm_ffi import structural_hash

    from tuner.engine.fx_graph import import_graph
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    target, lowering = resolve_target("llvm").target, Lowering(layout="NHWC")
    captured = []

    def capture(gm, example_inputs):
        captured.append(import_graph(gm, example_inputs))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=capture)(torch.zeros(network.input_shape))

    def keys(relax_mod):
        return sorted((t.name, t.weight, structural_hash(t.extracted.dispatched[0]))
                      for t in extract_tasks(relax_mod, target, lowering))

    assert len(captured) == 1 and keys(captured[0].relax_mod) == keys(network.relax_mod)


def test_tasks_match_tune_py():
    """The captured graph lowers to the very tasks tune.py extracts from the same model, so
    a work dir's records apply."""
    from tuner.engine.networks import load_network

    for factory, shape in ((tiny_convnet, (8, 16, 16)), (tiny_classifier, (4, 8, 8))):
        network = load_network(model_spec=f"tests.models:{factory.__name__}", input_shape=shape)
        _same_tasks_as_tune_py(factory(), network)


def test_batch_norm_is_folded():
    from tuner.engine.fx_graph import import_graph

    captured = []

    def capture(gm, example_inputs):
        captured.append(import_graph(gm, example_inputs))
        return gm.forward

    torch.compile(tiny_convnet(), backend=capture)(torch.zeros(*TINY_SHAPE))
    graph = captured[0]
    assert graph.folded == 1 and graph.user_inputs == [2] and len(graph.weights) == 6
    assert "batch_norm" not in str(graph.relax_mod)


def test_no_database_compiles_untuned_with_one_warning():
    x = torch.randn(1, 4, 8, 8)
    out, expected, caught = _run(tiny_classifier(), x)
    assert _close(out, expected)
    assert len(caught) == 1 and "no tuning database" in str(caught[0].message)
    assert caught[0].filename == __file__  # pointed at the caller's line, not torch's


class _Lgamma(torch.nn.Module):
    """A conv, then an op Relax's importer lacks (aten.lgamma)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.lgamma(self.conv(x).abs() + 1)


def test_unsupported_op_falls_back_with_one_warning():
    model = _Lgamma().eval()
    x = torch.randn(1, 3, 8, 8)
    out, expected, caught = _run(model, x)
    assert torch.equal(out, expected)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "runs in PyTorch" in message and "aten.lgamma" in message


def test_dynamic_shapes_fall_back():
    out, expected, caught = _run(tiny_classifier(), torch.randn(3, 4, 8, 8), dynamic=True)
    assert torch.equal(out, expected)
    assert len(caught) == 1 and "dynamic shapes" in str(caught[0].message)


def test_training_mode_falls_back():
    model = tiny_convnet().train()
    x = torch.randn(*TINY_SHAPE)
    compiled = torch.compile(model, backend="metatune")
    with pytest.warns(FallbackWarning, match="batch_norm in training mode"):
        out = compiled(x)
    assert out.shape == (1, 16, 16, 16)


def test_a_changed_weight_runs_in_pytorch():
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU()).eval()
    x = torch.randn(2, 6)
    out, expected, _ = _run(model, x)
    assert _close(out, expected)
    with torch.no_grad():
        model[0].weight.mul_(2.0)
        compiled = torch.compile(model, backend="metatune")
        with pytest.warns(FallbackWarning, match="a weight changed"):
            out = compiled(x)
        assert torch.equal(out, model(x))


def test_unknown_option_is_refused():
    compiled = torch.compile(tiny_classifier(), backend="metatune", options={"workdir": "x"})
    with pytest.raises(Exception, match="unknown option.*'workdir'.*work_dir, target, layout"):
        compiled(torch.randn(1, 4, 8, 8))


def test_unknown_precision_is_refused():
    compiled = torch.compile(tiny_classifier(), backend="metatune",
                             options={"precision": "int8"})
    with pytest.raises(Exception, match="precision='int8': choose one of fp32, bf16"):
        compiled(torch.randn(1, 4, 8, 8))


def _installed_entry_point() -> bool:
    return any(ep.name == "metatune"
               for ep in importlib.metadata.entry_points(group="torch_dynamo_backends"))


@pytest.mark.skipif(not _installed_entry_point(),
                    reason="the package is not installed (pip install -e .): no entry point")
def test_entry_point_needs_no_import(tmp_path):
    script = (
        "import sys, warnings, torch\n"
        "warnings.simplefilter('ignore')\n"
        "m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).eval()\n"
        "x = torch.randn(2, 4)\n"
        "assert 'tuner' not in sys.modules\n"
        "with torch.no_grad():\n"
        "    y = torch.compile(m, backend='metatune')(x)\n"
        "    assert torch.allclose(y, m(x), atol=1e-5)\n"
        "print('tvm' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"  # compiled by TVM, not left to PyTorch


def test_import_tuner_registers_lazily():
    script = (
        "import sys\n"
        "import tuner\n"
        "assert 'torch' not in sys.modules and 'tvm' not in sys.modules\n"
        "from torch._dynamo.backends.registry import lookup_backend\n"
        "import tuner.registration as r\n"
        "assert lookup_backend('metatune') is r.metatune\n"
        "assert 'tvm' not in sys.modules\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def _artifact_by_hand(model, shape: tuple[int, ...], out_dir) -> None:
    """An artifact in the format of tune.py --export (manifest.json + model.so), built
    untuned: tests the loader apart from the exporter."""
    import tvm
    from tvm import relax

    from tuner.engine.networks import load_torch_network
    from tuner.engine.targets import resolve_target

    network = load_torch_network(model, "hand", shape)
    target = resolve_target("llvm").target
    with target, tvm.transform.PassContext(opt_level=3):
        executable = relax.build(network.relax_mod, target=target)
    os.makedirs(out_dir)
    executable.export_library(os.path.join(out_dir, "model.so"))
    manifest = {"format": "metatune-artifact", "format_version": 1, "library": "model.so",
                "function": "main", "device": "cpu", "target": str(target),
                "inputs": [{"name": "input", "shape": list(shape), "dtype": "float32"}],
                "outputs": [], "output_tuple": True, "network": "hand"}
    with open(os.path.join(out_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)


def test_load_returns_a_module_on_torch_tensors(tmp_path):
    import metatune
    from metatune.deploy import ArtifactError, CompiledModule

    model = tiny_classifier()
    _artifact_by_hand(model, (1, 4, 8, 8), tmp_path / "tiny.metatune")
    loaded = metatune.load(tmp_path / "tiny.metatune")
    assert isinstance(loaded, CompiledModule) and isinstance(loaded, torch.nn.Module)
    x = torch.randn(1, 4, 8, 8)
    with torch.no_grad():
        assert _close(loaded(x), model(x))
    with pytest.raises(ValueError, match="compiled for"):
        loaded(torch.randn(2, 4, 8, 8))
    with pytest.raises(ArtifactError, match="no such directory"):
        metatune.load(tmp_path / "missing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text('{"format": "other"}')
    with pytest.raises(ArtifactError, match="not a metatune-artifact manifest"):
        metatune.load(tmp_path / "bad")


def _exporter_landed() -> bool:
    return importlib.util.find_spec("tuner.app.export") is not None


@pytest.mark.skipif(not _exporter_landed(),
                    reason="tune.py --export (tuner/app/export.py) has not landed yet")
def test_load_of_an_exported_work_dir(tuned, tmp_path):
    import export
    import metatune

    out = tmp_path / "tiny.metatune"
    assert export.main(["--work-dir", tuned, "--out", str(out)]) == 0
    loaded = metatune.load(out)
    model, x = tiny_convnet(), torch.randn(*TINY_SHAPE)
    with torch.no_grad():
        assert _close(loaded(x), model(x))


@pytest.mark.slow
def test_resnet18_equals_eager():
    """torchvision's resnet18 (batch norm folded, residual adds) through the backend, no
    database: the same tasks as tune.py's, and the output of eager PyTorch."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    out, expected, caught = _run(model, x)
    assert [str(w.message) for w in caught] == [
        f"metatune: no tuning database (pass options={{'work_dir': DIR}} or set "
        f"{ENV_WORK_DIR}): compiling untuned"]
    assert out.shape == (1, 1000) and _close(out, expected, rtol=1e-3)


@pytest.mark.slow
def test_resnet18_tasks_match_tune_py():
    """The 20 tasks of tune.py's resnet-18 (its batch norms folded, NHWC), from Dynamo's graph."""
    from tuner.engine.networks import builtin_module, load_network

    _same_tasks_as_tune_py(builtin_module("resnet-18"), load_network("resnet-18"))


def test_a_failed_registration_says_why_once_and_import_goes_on(monkeypatch, caplog):
    """A torch whose registry refuses the backend: one warning with the reason, no error."""
    import types

    import tuner.registration as r

    def refuse(**_):
        raise TypeError("register_backend() got an unexpected keyword")

    registry = types.SimpleNamespace(_COMPILER_FNS={}, register_backend=refuse)
    monkeypatch.setitem(sys.modules, r._REGISTRY, registry)
    monkeypatch.setattr(r, "_warned", False)
    with caplog.at_level("WARNING", logger="metatune"):
        r.install()
        r.install()
    [record] = caplog.records
    assert "TypeError: register_backend() got an unexpected keyword" in record.getMessage()
    assert "pip install -e ." in record.getMessage()
