"""activations_before_reshape: the GELU between two ``nn.Linear`` layers on a 3-D tensor, and
a layer scale and residual add after one, fuse into the matmul, and the network computes
what it computed."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import relax as R

from tests.relax_ops import relax_ops
from tuner.engine.activation_fusion import activations_before_reshape, moved_operand_shape
from tuner.engine.tasks import Lowering, extract_tasks

W1 = np.random.default_rng(1).standard_normal((16, 32)).astype("float32")
W2 = np.random.default_rng(2).standard_normal((32, 16)).astype("float32")


@tvm.script.ir_module
class Mlp:
    """Two ``nn.Linear`` on a (1, 8, 16) tensor with a GELU between, as PyTorch imports
    them: reshape to 2-D, matmul, bias, reshape back."""

    @R.function
    def main(x: R.Tensor((1, 8, 16), "float32")):
        with R.dataflow():
            a = R.reshape(x, R.shape([8, 16]))
            b = R.matmul(a, R.const(W1))
            c = R.add(b, R.const(np.ones(32, "float32")))
            d = R.reshape(c, R.shape([1, 8, 32]))
            e = R.nn.gelu(d)
            f = R.reshape(e, R.shape([8, 32]))
            g = R.matmul(f, R.const(W2))
            h = R.reshape(g, R.shape([1, 8, 16]))
            R.output(h)
        return h


def test_gelu_moves_above_the_reshape_and_the_reshapes_cancel():
    ops = relax_ops(activations_before_reshape()(Mlp))
    assert ops.index("relax.nn.gelu") == ops.index("relax.add") + 1, ops
    assert ops.count("relax.reshape") == 2, ops  # the input's and the output's
    assert relax_ops(Mlp).count("relax.reshape") == 4  # the input module is not changed


def test_gelu_fuses_into_the_matmul_and_computes_the_same():
    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    names = [t.name for t in extract_tasks(Mlp, target, Lowering())]
    assert any("matmul" in n and "gelu" in n for n in names), names
    assert not any(n.startswith("gelu") or "reshape" in n and "gelu" in n for n in names)
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal((1, 8, 16)).astype("float32"))
    outs = [relax.VirtualMachine(relax.build(mod, "llvm"), tvm.cpu())["main"](x).numpy()
            for mod in (Mlp, activations_before_reshape()(Mlp))]
    assert np.abs(outs[0] - outs[1]).max() <= 1e-5 * np.abs(outs[0]).max()


@tvm.script.ir_module
class ScaledResidual:
    """ConvNeXt's block end in NHWC: ``nn.Linear`` (2-D matmul and bias), reshaped back,
    times the layer scale (varies along channels, the last axis), plus the block's input."""

    @R.function
    def main(x: R.Tensor((1, 4, 4, 16), "float32")):
        with R.dataflow():
            a = R.reshape(x, R.shape([16, 16]))
            b = R.matmul(a, R.const(W1[:, :16]))
            c = R.add(b, R.const(np.ones(16, "float32")))
            d = R.reshape(c, R.shape([1, 4, 4, 16]))
            e = R.multiply(d, R.const(np.linspace(0.5, 1.5, 16, dtype="float32")
                                      .reshape(1, 1, 1, 16)))
            f = R.add(e, x)
            R.output(f)
        return f


def test_scale_and_residual_fuse_into_the_matmul_and_compute_the_same():
    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    names = [t.name for t in extract_tasks(ScaledResidual, target, Lowering())]
    assert any("matmul" in n and "multiply" in n and n.count("add") == 2 for n in names), names
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal((1, 4, 4, 16))
                           .astype("float32"))
    outs = [relax.VirtualMachine(relax.build(mod, "llvm"), tvm.cpu())["main"](x).numpy()
            for mod in (ScaledResidual, activations_before_reshape()(ScaledResidual))]
    assert np.abs(outs[0] - outs[1]).max() <= 1e-5 * np.abs(outs[0]).max()


@pytest.mark.parametrize("before, after, other, want", [
    ([8, 32], [1, 8, 32], [1, 8, 32], [8, 32]),       # a residual: reshaped like x
    ([8, 32], [1, 8, 32], [1, 1, 32], [1, 32]),       # a per-channel scale
    ([8, 32], [1, 8, 32], [32], [1, 32]),
    ([8, 32], [1, 8, 32], [], []),                    # a scalar
    ([8, 32], [1, 8, 32], [1, 8, 1], None),           # varies along another axis
    ([8, 32], [2, 4, 32], [2, 1, 32], None),
    ([8, 32], [1, 32, 8], [1, 32, 8], None),          # the last axis changes
    ([1, 8, 32], [8, 32], [8, 32], None),             # removes axes: never moved
])
def test_moved_operand_shape(before, after, other, want):
    assert moved_operand_shape(before, after, other) == want
