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
