"""Import of the four built-in networks and their task extraction, on llvm."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.engine.networks import load_network
from tuner.engine.targets import resolve_target
from tuner.engine.tasks import extract_tasks, format_task_table

# (tasks, of which convolutions) after batch-norm folding, legalize + fuse, on llvm.
EXPECTED = {"alexnet": (13, 5), "resnet-18": (19, 15), "vgg-16": (19, 9), "squeezenet": (33, 22)}


@pytest.fixture(scope="module")
def llvm():
    return resolve_target("llvm")


@pytest.mark.parametrize("name", list(EXPECTED))
def test_import_and_extract(name, llvm):
    net = load_network(name)
    assert net.input_shape == (1, 3, 224, 224)
    tasks = extract_tasks(net.relax_mod, llvm.target)
    n_tasks, n_conv = EXPECTED[name]
    assert len(tasks) == n_tasks
    assert sum(t.is_conv for t in tasks) == n_conv
    weighted = [t.flops * t.weight for t in tasks]
    assert weighted == sorted(weighted, reverse=True)  # heaviest first
    assert all(t.weight >= 1 for t in tasks)
    table = format_task_table(tasks)
    assert tasks[0].name in table and f"{n_tasks} tasks" in table


def test_batch_norm_is_folded_exactly():
    net = load_network(model_spec="tests.models:tiny_convnet", input_shape=(8, 16, 16))
    assert "batch-norm folded into convolution weights" in net.notes
    import torch

    from tests.models import tiny_convnet

    x = net.example_input()
    with torch.no_grad():
        expected = tiny_convnet()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(net.reference(x), expected, rtol=1e-4, atol=1e-5)
    # folded away: the Relax module has no batch_norm call
    assert "batch_norm" not in net.relax_mod.script()


def test_onnx_model_imports(tmp_path):
    import torch

    from tests.models import tiny_convnet

    path = tmp_path / "tiny.onnx"
    torch.onnx.export(tiny_convnet(), (torch.zeros(1, 8, 16, 16),), str(path), dynamo=False)
    net = load_network(onnx_path=str(path))
    assert net.input_shape == (1, 8, 16, 16) and net.name == "tiny"
    tasks = extract_tasks(net.relax_mod, resolve_target("llvm").target)
    assert any(t.is_conv for t in tasks)


# --- issue 63: a bad model is one line, whatever went wrong ---


def _celu_onnx(path) -> None:
    """A valid ONNX model of one op TVM's ONNX frontend does not convert (Celu)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Celu", ["x"], ["y"])], "celu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


@pytest.fixture
def bad_modules(tmp_path, monkeypatch):
    """Modules a user might pass to --model: one with a syntax error, one that raises while
    imported."""
    (tmp_path / "broken_syntax.py").write_text("def model(:\n    pass\n")
    (tmp_path / "raises_on_import.py").write_text("import os\nraise OSError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("spec, message", [
    ("broken_syntax:model", r"cannot import broken_syntax \(SyntaxError: .*broken_syntax.py, "
                            r"line 1\)"),
    ("raises_on_import:model", r"cannot import raises_on_import \(OSError: no GPU here\)"),
    ("tests.models:nothing_here", "cannot import 'nothing_here' from tests.models"),
    ("tests.models:not_a_module", "returned int, not a torch.nn.Module"),
])
def test_a_bad_model_module_is_one_line(bad_modules, spec, message):
    from metatune.errors import ModelImportError

    with pytest.raises(ModelImportError, match=message) as caught:
        load_network(model_spec=spec, input_shape=(8, 16, 16))
    assert "\n" not in str(caught.value)


def test_a_bad_onnx_file_is_one_line(tmp_path):
    import torch

    from metatune.errors import ModelImportError
    from tests.models import tiny_convnet

    good = tmp_path / "tiny.onnx"
    torch.onnx.export(tiny_convnet(), (torch.zeros(1, 8, 16, 16),), str(good), dynamo=False)
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    _celu_onnx(tmp_path / "celu.onnx")
    for path, message in [(truncated, "not a readable ONNX model"),
                          (tmp_path / "celu.onnx", "TVM could not import it.*Celu")]:
        with pytest.raises(ModelImportError, match=message) as caught:
            load_network(onnx_path=str(path))
        assert "\n" not in str(caught.value)
