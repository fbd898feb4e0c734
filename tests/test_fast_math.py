"""fast_math: float32 exp/erf/tanh and the activations on them legalize to vector polynomials
(no libm call per element) that agree with PyTorch's within a few ulps; other dtypes keep
TVM's own legalization."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import tvm
from tvm import relax
from tvm.script import relax as R

from tuner.engine.fast_math import FAST, fast_math_legalize_map
from tuner.engine.precision import legalize_map

TARGET = {"kind": "llvm", "num-cores": 1}
SHAPE = (64, 96)

#: Relax op -> (how to call it on a Relax value, PyTorch's reference)
CASES = {
    "relax.exp": (lambda x: R.exp(x), torch.exp),
    "relax.erf": (lambda x: R.erf(x), torch.erf),
    "relax.tanh": (lambda x: R.tanh(x), torch.tanh),
    "relax.sigmoid": (lambda x: R.sigmoid(x), torch.sigmoid),
    "relax.nn.silu": (lambda x: R.nn.silu(x), torch.nn.functional.silu),
    "relax.nn.gelu": (lambda x: R.nn.gelu(x), torch.nn.functional.gelu),
    "relax.nn.gelu_tanh": (lambda x: R.nn.gelu_tanh(x),
                           lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
    "relax.nn.softmax": (lambda x: R.nn.softmax(x, axis=-1), lambda t: torch.softmax(t, -1)),
}


def _module(op: str, dtype: str = "float32"):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(SHAPE, dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(CASES[op][0](x))
        bb.emit_func_output(out)
    return bb.get()


def _legalized(op: str, dtype: str = "float32"):
    return relax.transform.LegalizeOps(fast_math_legalize_map())(_module(op, dtype))


def _asm(mod) -> str:
    ex = tvm.compile(mod, target=tvm.target.Target(TARGET))
    return "\n".join(m.inspect_source("asm") for m in [ex.mod, *ex.mod.imports]
                     if m.kind in ("llvm", "c"))


def test_every_case_is_covered():
    assert set(CASES) == set(FAST)


@pytest.mark.parametrize("op", sorted(CASES))
def test_fast_op_matches_pytorch(op):
    rng = np.random.default_rng(0)
    # typical activations, the tails (exp near its float32 limits), and zero
    x = np.concatenate([rng.standard_normal(SHAPE[0] * SHAPE[1] - 6) * 4,
                        [-87.0, -30.0, 0.0, 10.0, 30.0, 80.0]]).astype("float32").reshape(SHAPE)
    vm = relax.VirtualMachine(tvm.compile(_legalized(op), target=tvm.target.Target(TARGET)),
                              tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    want = CASES[op][1](torch.from_numpy(x).double()).numpy()
    assert np.isfinite(got).all()
    # measured: fast exp 3.6e-6 relative at exp(80) (TVM's libm 6e-8); the rest <= 6e-7
    # relative, <= 1.1e-6 absolute (as TVM's own legalization and PyTorch's float32)
    np.testing.assert_allclose(got, want, rtol=5e-6, atol=2e-6)


@pytest.mark.parametrize("op, libm", [("relax.nn.gelu", "erff"), ("relax.nn.softmax", "expf"),
                                      ("relax.tanh", "expf")])
def test_no_libm_call_per_element(op, libm):
    assert f"{libm}@" in _asm(relax.transform.LegalizeOps()(_module(op)))  # TVM's own
    assert f"{libm}@" not in _asm(_legalized(op))


def test_other_dtypes_keep_tvms_legalization():
    ours = _legalized("relax.nn.gelu", "float64")
    theirs = relax.transform.LegalizeOps()(_module("relax.nn.gelu", "float64"))
    tvm.ir.assert_structural_equal(ours, theirs)


def test_both_precisions_legalize_fast():
    assert set(FAST) <= set(legalize_map("fp32"))
    bf16 = legalize_map("bf16")
    assert set(FAST) <= set(bf16) and {"relax.nn.conv2d", "relax.matmul"} <= set(bf16)
