"""exp, erf and tanh as vector polynomials, not a scalar C library call per element.

TVM 0.27's LLVM code generator lowers ``T.exp`` and ``T.erf`` on float32 to the C library's
``expf`` and ``erff`` (``T.tanh`` goes through ``expf``): a call per element, so the loops
around them are not vectorized. GELU (``erf``), softmax, sigmoid and SiLU (``exp``) and
tanh paid it in every network that has them: in convnext-atto tuned for 128 trials on the
2-core EPYC its four GELU kernels took 5.19 of the network's 13.34 ms (a 500k-element GELU
1.25 ms a call), where OpenVINO fuses GELU into its matmuls (docs/lab/compile/README.md).
:func:`fast_math_legalize_map` legalizes those Relax operators on float32 with TOPI's
``fast_exp``, ``fast_erf`` and ``fast_tanh`` (polynomials, vectorized like any arithmetic;
outputs within a few float32 ulps of the exact functions, tested against them); other
dtypes keep TVM's own legalization.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tuner.engine.relax_rewrite import dtype

FLOAT32 = "float32"


def default_legalize(bb, call):
    """TVM's registered legalization of ``call``."""
    import tvm

    return tvm.ir.Op.get(call.op.name).get_attr("FLegalize")(bb, call)


def _float32_only(fast: Callable[[object, object], object]) -> Callable:
    """A legalization that calls ``fast(bb, call)`` on float32 and TVM's own otherwise."""

    def legalize(bb, call):
        return fast(bb, call) if dtype(call.args[0]) == FLOAT32 else default_legalize(bb, call)

    return legalize


def _unary(topi_fn_name: str, hint: str) -> Callable:
    def fast(bb, call):
        from tvm import topi

        return bb.call_te(getattr(topi, topi_fn_name), call.args[0], primfunc_name_hint=hint)

    return fast


def _gelu(bb, call):
    from tvm import tirx, topi

    def te_gelu(x):
        half = tirx.const(0.5, FLOAT32)
        return x * (half + topi.fast_erf(x * tirx.const(0.5 ** 0.5, FLOAT32)) * half)

    return bb.call_te(te_gelu, call.args[0], primfunc_name_hint="gelu")


def _gelu_tanh(bb, call):
    from tvm import tirx, topi

    def te_gelu_tanh(x):
        inner = tirx.const(math.sqrt(2.0 / math.pi), FLOAT32) * x * (
            tirx.const(1.0, FLOAT32) + tirx.const(0.044715, FLOAT32) * x * x)
        return tirx.const(0.5, FLOAT32) * x * (tirx.const(1.0, FLOAT32) + topi.fast_tanh(inner))

    return bb.call_te(te_gelu_tanh, call.args[0], primfunc_name_hint="gelu_tanh")


def _sigmoid_of(x):
    from tvm import tirx, topi

    one = tirx.const(1.0, FLOAT32)
    return one / (one + topi.fast_exp(-x))


def _sigmoid(bb, call):
    return bb.call_te(_sigmoid_of, call.args[0], primfunc_name_hint="sigmoid")


def _silu(bb, call):
    return bb.call_te(lambda x: x * _sigmoid_of(x), call.args[0], primfunc_name_hint="silu")


def _softmax(bb, call):
    from tvm import topi

    return bb.call_te(topi.nn.fast_softmax, call.args[0], int(call.attrs.axis),
                      primfunc_name_hint="softmax")


FAST = {
    "relax.exp": _unary("fast_exp", "exp"),
    "relax.erf": _unary("fast_erf", "erf"),
    "relax.tanh": _unary("fast_tanh", "tanh"),
    "relax.sigmoid": _sigmoid,
    "relax.nn.silu": _silu,
    "relax.nn.gelu": _gelu,
    "relax.nn.gelu_tanh": _gelu_tanh,
    "relax.nn.softmax": _softmax,
}


def fast_math_legalize_map() -> dict[str, Callable]:
    """``LegalizeOps``' ``customize_legalize_map`` entries for the operators of :data:`FAST`:
    float32 through the fast polynomials, other dtypes as TVM legalizes them."""
    return {name: _float32_only(fast) for name, fast in FAST.items()}
