"""clip_to_min_max: a clip between NHWC convolutions stays in NHWC (no transposes around
it), fuses into the convolution before it, and computes what the clip computed."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

from tests.relax_ops import relax_ops
from tuner.engine.clip_layout import clip_to_min_max
from tuner.engine.tasks import Lowering, extract_tasks

NHWC = {"relax.nn.conv2d": ["NHWC", "OHWI"]}


@tvm.script.ir_module
class ConvClipConv:
    @R.function
    def main(x: R.Tensor((1, 8, 12, 12), "float32"), w: R.Tensor((8, 8, 3, 3), "float32"),
             w2: R.Tensor((8, 8, 3, 3), "float32")):
        with R.dataflow():
            y = R.nn.conv2d(x, w, padding=[1, 1])
            z = R.clip(y, R.prim_value(0.0), R.prim_value(6.0))
            o = R.nn.conv2d(z, w2, padding=[1, 1])
            R.output(o)
        return o


@tvm.script.ir_module
class IntClip:
    @R.function
    def main(x: R.Tensor((4,), "int32")):
        with R.dataflow():
            y = R.clip(x, R.prim_value(0), R.prim_value(6))
            R.output(y)
        return y


def test_clip_becomes_min_max_and_stays_in_nhwc():
    before = relax_ops(relax.transform.ConvertLayout(NHWC)(ConvClipConv))
    rewritten = clip_to_min_max()(ConvClipConv)
    after = relax_ops(relax.transform.ConvertLayout(NHWC)(rewritten))
    assert "relax.clip" in before and "relax.clip" not in after
    assert {"relax.maximum", "relax.minimum"} <= set(after)
    # the conversion's own transposes (input, two weights, output) and no more
    assert before.count("relax.permute_dims") == 6 and after.count("relax.permute_dims") == 4
    assert relax_ops(clip_to_min_max()(IntClip)) == ["relax.clip"]  # not a float: left alone
    assert "relax.clip" in relax_ops(ConvClipConv)  # the input module is not changed


def test_rewritten_network_computes_the_same():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") * 3
            for s in ((1, 8, 12, 12), (8, 8, 3, 3), (8, 8, 3, 3))]
    outs = []
    for mod in (ConvClipConv, relax.transform.ConvertLayout(NHWC)(
            clip_to_min_max()(ConvClipConv))):
        vm = relax.VirtualMachine(relax.build(mod, "llvm"), tvm.cpu())
        outs.append(vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy())
    assert np.abs(outs[0] - outs[1]).max() <= 1e-4 * np.abs(outs[0]).max()


def test_nhwc_tasks_fuse_the_clip_into_the_convolution():
    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    names = [t.name for t in extract_tasks(ConvClipConv, target, Lowering(layout="NHWC"))]
    assert any("conv2d" in n and "maximum" in n and "minimum" in n for n in names), names
    assert not any("clip" in n for n in names), names
