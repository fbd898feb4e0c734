"""fold_permutes: a ConvNeXt block's own transposes cancel against the NHWC conversion's,
the residual scale and add stay in NHWC, and the network computes what it computed."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import relax as R

from tests.relax_ops import relax_ops
from tuner.engine.permute_fold import compose, fold_permutes, inverse
from tuner.engine.tasks import Lowering, extract_tasks

NHWC = {"relax.nn.conv2d": ["NHWC", "OHWI"]}
SCALE = np.linspace(0.5, 1.5, 8, dtype="float32").reshape(8, 1, 1)


@tvm.script.ir_module
class ConvNeXtBlock:
    """A stem convolution; then torchvision's CNBlock: depthwise conv, LayerNorm and a
    linear layer channels-last, the layer scale and the residual add in NCHW; then the next
    convolution. The weights are bound as constants (as :func:`_bound` does), as a
    network's are."""

    @R.function
    def main(x: R.Tensor((1, 8, 6, 6), "float32"), w0: R.Tensor((8, 8, 1, 1), "float32"),
             w: R.Tensor((8, 1, 3, 3), "float32"),
             gamma: R.Tensor((8,), "float32"), beta: R.Tensor((8,), "float32"),
             lin: R.Tensor((8, 8), "float32"), w2: R.Tensor((8, 8, 1, 1), "float32")):
        with R.dataflow():
            stem = R.nn.conv2d(x, w0)
            y = R.nn.conv2d(stem, w, padding=[1, 1], groups=8)
            t = R.permute_dims(y, axes=[0, 2, 3, 1])
            n = R.nn.layer_norm(t, gamma, beta, axes=[-1])
            m = R.matmul(n, lin)
            b = R.permute_dims(m, axes=[0, 3, 1, 2])
            s = R.multiply(R.const(SCALE), b)
            r = R.add(s, stem)
            o = R.nn.conv2d(r, w2)
            R.output(o)
        return o


WEIGHT_SHAPES = {"w0": (8, 8, 1, 1), "w": (8, 1, 3, 3), "gamma": (8,), "beta": (8,),
                 "lin": (8, 8), "w2": (8, 8, 1, 1)}


def _bound():
    """The block with random weights bound as constants; only ``x`` is an input."""
    rng = np.random.default_rng(1)
    params = {k: rng.standard_normal(s).astype("float32") for k, s in WEIGHT_SHAPES.items()}
    return relax.transform.BindParams("main", params)(ConvNeXtBlock)


def _converted(fold: bool):
    mod = relax.transform.ConvertLayout(NHWC)(_bound())
    return relax.transform.FoldConstant()(fold_permutes()(mod) if fold else mod)


@pytest.mark.parametrize("axes", [[0, 2, 3, 1], [0, 3, 1, 2], [2, 0, 1]])
def test_compose_and_inverse(axes):
    assert compose(axes, inverse(axes)) == list(range(len(axes)))
    x = np.arange(24).reshape((2, 3, 4) if len(axes) == 3 else (1, 2, 3, 4))
    second = list(reversed(range(len(axes))))
    assert np.array_equal(x.transpose(axes).transpose(second),
                          x.transpose(compose(axes, second)))


def test_only_the_edges_keep_their_transposes():
    before, after = relax_ops(_converted(False)), relax_ops(_converted(True))
    converted = relax.transform.ConvertLayout(NHWC)(_bound())
    before_fold = relax_ops(converted).count("relax.permute_dims")
    # weights are folded either way; the conversion leaves data transposes in the middle
    assert before.count("relax.permute_dims") >= 4
    # left: the input into NHWC and the output back to NCHW
    assert after.count("relax.permute_dims") == 2, after
    assert after[0] == "relax.permute_dims" and after[-1] == "relax.permute_dims"
    fold_permutes()(converted)
    assert relax_ops(converted).count("relax.permute_dims") == before_fold  # input not changed


def test_folded_block_computes_the_same():
    rng = np.random.default_rng(0)
    x = tvm.runtime.tensor(rng.standard_normal((1, 8, 6, 6)).astype("float32"))
    outs = []
    for mod in (_bound(), _converted(True)):
        vm = relax.VirtualMachine(relax.build(mod, "llvm"), tvm.cpu())
        outs.append(vm["main"](x).numpy())
    assert np.abs(outs[0] - outs[1]).max() <= 1e-4 * np.abs(outs[0]).max()


def test_non_commuting_operands_are_left_alone():
    @tvm.script.ir_module
    class Mixed:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((3, 2), "float32")):
            with R.dataflow():
                t = R.permute_dims(x, axes=[1, 0])
                z = R.subtract(t, y)  # y is not a transpose nor a constant: stays
                R.output(z)
            return z

    assert relax_ops(fold_permutes()(Mixed)) == ["relax.permute_dims", "relax.subtract"]


def test_nhwc_tasks_of_the_block_have_no_transpose_inside():
    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    names = [t.name for t in extract_tasks(_bound(), target, Lowering(layout="NHWC"))]
    inner = [n for n in names if "transpose" in n and "conv2d" not in n]
    # the input's and the output's transposes may stand alone or fuse; nothing else does
    assert len(inner) <= 2, names
