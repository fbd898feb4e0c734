"""Tuning precision: ``fp32`` (as imported) or ``bf16`` (convolutions and dense layers on
the AVX-512 BF16 dot product).

``bf16`` changes how a network is legalized (:func:`legalize_map`, used by
:func:`tuner.engine.tasks.fuse_pipeline`, so extraction and the final compile agree): each
2-D convolution in NHWC with one group, an even number of input channels and a multiple
of 16 output channels, and each matmul by a 2-D weight (``K`` even, ``N`` a multiple of
16), becomes :mod:`tuner.engine.bf16_ops`' bf16 compute: its input rounded to bf16 inside
the kernel, its weight packed and rounded to bf16 once at compile time, products summed
in f32 by ``vdpbf16ps``, output f32. Everything else
(the first convolution's three channels, depthwise convolutions, attention's matmul of
two activations, bias, activations, pooling, softmax) stays f32, and so do the network's
input and output.

TVM's own ``relax.transform.ToMixedPrecision`` converts to float16 only (``out_dtype`` is
the accumulator; ``bfloat16`` fails type inference), and bf16 compute without the
intrinsic is f32 arithmetic plus conversions (``experiments/precision_probe.py``).
"""

from __future__ import annotations

from metatune.errors import ConfigError
from tuner.engine.fast_math import default_legalize, fast_math_legalize_map

#: The precisions a network can be tuned in.
PRECISIONS = ("fp32", "bf16")
#: The LLVM target feature the ``bf16`` precision needs (``vdpbf16ps``).
BF16_FEATURE = "avx512bf16"
#: The output check's default tolerance (relative max error) for each precision. bf16
#: keeps 8 bits of mantissa (a relative rounding error up to 2^-9 = 0.2 % per input).
RTOL = {"fp32": 1e-3, "bf16": 5e-2}


def check_precision(precision: str, layout: str, target=None) -> None:
    """Refuse a precision this configuration cannot run.

    Args:
        precision: One of :data:`PRECISIONS`.
        layout: The data layout (``NHWC`` or ``NCHW``).
        target: The ``tvm.target.Target`` to check for :data:`BF16_FEATURE`; ``None``:
            not checked.

    Raises:
        ConfigError: An unknown precision, or ``bf16`` with NCHW, for a GPU, or for a CPU
            without :data:`BF16_FEATURE`.
    """
    if precision not in PRECISIONS:
        raise ConfigError(f"precision={precision!r}: choose one of {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return
    if layout != "NHWC":
        raise ConfigError(f"precision=bf16 needs layout=NHWC (the dot product runs over the "
                          f"innermost channels), not {layout}")
    if target is None:
        return
    from tvm.target import codegen

    if target.kind.name != "llvm" or not codegen.target_has_features(BF16_FEATURE, target):
        mcpu = target.attrs.get("mcpu") if target.kind.name == "llvm" else target.kind.name
        raise ConfigError(f"precision=bf16 needs a CPU with AVX-512 BF16 (AMD Zen 4, Intel "
                          f"Cooper Lake, Sapphire Rapids or later); the target ({mcpu}) has "
                          "none: use precision=fp32")


def rtol_for(precision: str, configured: float) -> float:
    """The output check's tolerance: the configured one, raised to the precision's
    :data:`RTOL` when that is looser."""
    return max(configured, RTOL.get(precision, configured))


def _static(shape) -> list[int] | None:
    try:
        return [int(d) for d in shape]
    except (TypeError, ValueError):
        return None


def _conv2d(bb, call):
    """bf16 legalization of ``relax.nn.conv2d``; TVM's own for a convolution it cannot
    take."""
    from tuner.engine import bf16_ops
    from tuner.engine.bf16_dot import LANES, PAIR

    attrs = call.attrs
    data, weight = call.args
    dshape = _static(data.ty.shape)
    wshape = _static(weight.ty.shape)
    eligible = (
        dshape is not None and wshape is not None and int(attrs.groups) == 1
        and str(attrs.data_layout) == "NHWC" and str(attrs.kernel_layout) == "OHWI"
        and str(attrs.out_layout) == "NHWC" and data.ty.dtype == "float32"
        and weight.ty.dtype == "float32"
        and str(attrs.out_dtype) in ("", "float32", "void")
        and wshape[0] % LANES == 0 and wshape[3] % PAIR == 0 and dshape[3] == wshape[3])
    if not eligible:
        return default_legalize(bb, call)
    w = bb.emit_te(bf16_ops.pack_conv_weight, weight, primfunc_name_hint="pack_bf16")
    func = bf16_ops.prim_func(
        bf16_ops.conv2d_nhwc, [dshape, _static(w.ty.shape)], [int(s) for s in attrs.strides],
        [int(p) for p in attrs.padding], [int(d) for d in attrs.dilation],
        name="conv2d_nhwc_bf16")
    return _call(bb, func, "conv2d_nhwc_bf16", [data, w])


def _matmul(bb, call):
    """bf16 legalization of ``relax.matmul`` by a 2-D weight; TVM's own otherwise."""
    from tvm import topi

    from tuner.engine import bf16_ops
    from tuner.engine.bf16_dot import LANES, PAIR

    a, b = call.args
    ashape = _static(a.ty.shape)
    bshape = _static(b.ty.shape)
    eligible = (
        ashape is not None and bshape is not None and len(bshape) == 2 and len(ashape) >= 2
        and a.ty.dtype == "float32" and b.ty.dtype == "float32"
        and str(call.attrs.out_dtype) in ("", "float32", "void")
        and ashape[-1] == bshape[0] and bshape[0] % PAIR == 0 and bshape[1] % LANES == 0)
    if not eligible:
        return default_legalize(bb, call)
    rows = 1
    for d in ashape[:-1]:
        rows *= d
    x = a if len(ashape) == 2 else bb.emit_te(topi.reshape, a, [rows, ashape[-1]],
                                              primfunc_name_hint="reshape")
    w = bb.emit_te(bf16_ops.pack_dense_weight, b, primfunc_name_hint="pack_bf16")
    func = bf16_ops.prim_func(bf16_ops.dense, [[rows, ashape[-1]], _static(w.ty.shape)],
                              name="dense_bf16")
    out = _call(bb, func, "dense_bf16", [x, w])
    if len(ashape) == 2:
        return out
    return bb.call_te(topi.reshape, bb.emit(out), [*ashape[:-1], bshape[1]],
                      primfunc_name_hint="reshape")


def _call(bb, func, name: str, args: list):
    """``R.call_tir`` of a TIR function added to the module under ``name``."""
    from tvm import relax

    out = func.params[-1]
    gvar = bb.add_func(func, name)
    return relax.call_tir(gvar, args, relax.TensorType([int(d) for d in out.shape],
                                                       str(out.dtype)))


def legalize_map(precision: str) -> dict:
    """``LegalizeOps``' ``customize_legalize_map`` for ``precision``: float32 exp, erf, tanh
    and the activations built on them as vector polynomials
    (:func:`~tuner.engine.fast_math.fast_math_legalize_map`), TVM's own legalization for
    the rest; for bf16 also the convolutions and dense layers on bf16 inputs (registers
    the bf16 intrinsic and its rule)."""
    rules = fast_math_legalize_map()
    if precision == "fp32":
        return rules
    from tuner.engine.bf16_dot import register

    register()
    return {**rules, "relax.nn.conv2d": _conv2d, "relax.matmul": _matmul}


def packed_weights_fixed(precision: str) -> list:
    """Passes to run after ``AttachAttrLayoutFreeBuffers``: for bf16, the weights
    :mod:`tuner.engine.bf16_ops` packed are taken off each function's
    ``layout_free_buffers`` (they are in the intrinsic's layout already, and
    MetaSchedule's ``RewriteLayout`` cannot re-pack a buffer a tensorized block reads:
    every sampled schedule failed with ``ind.as<PrimVar>()``)."""
    if precision == "fp32":
        return []
    import tvm

    @tvm.transform.module_pass(opt_level=0, name="MetaTuneBF16WeightsFixed")
    def fixed(mod, _ctx):
        funcs = dict(mod.functions)
        for gvar, func in mod.functions.items():
            free = getattr(func, "attrs", None) and func.attrs.get("layout_free_buffers")
            if not free:
                continue
            keep = [i for i in free if not _is_packed(func, int(i))]
            if len(keep) < len(free):
                funcs[gvar] = func.with_attr("layout_free_buffers", keep)
        return tvm.IRModule(funcs, attrs=mod.attrs)

    return [fixed]


def _is_packed(func, index: int) -> bool:
    """Whether parameter ``index`` of a TIR function is a weight packed by
    :mod:`tuner.engine.bf16_ops` (bf16, innermost dims ``16 x 2``)."""
    from tuner.engine.bf16_dot import LANES, PAIR

    buffer = func.buffer_map[func.params[index]] if hasattr(func, "buffer_map") else \
        func.params[index]
    shape = list(getattr(buffer, "shape", []) or [])
    return (str(getattr(buffer, "dtype", "")) == "bfloat16" and len(shape) >= 4
            and [int(d) for d in shape[-2:]] == [LANES, PAIR])
