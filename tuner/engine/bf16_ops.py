"""bf16 convolution and dense as TIR functions the ``vdpbf16ps`` intrinsic can tile.

Each function takes the f32 input as it is stored and a packed bf16 weight, and writes
f32. Inside, a first block rounds the input to bf16 (zero-padding a convolution's on the
way), a reduction block multiplies bf16 by bf16 and sums in f32, a last one copies the
sums out. The weight is packed so that the sixteen output channels and two reduction
elements of one instruction are contiguous (``[..., 16, 2]``, :mod:`tuner.engine.bf16_dot`);
packing runs on the f32 weight constant and is folded at compile time.

The blocks are shaped for MetaSchedule (:func:`prim_func`):

- the reduction block iterates the output channel as ``(channel // 16, channel % 16)``
  and the reduction channel as ``(channel // 2, channel % 2)``, the intrinsic's shape, and
  carries ``schedule_rule = bf16_dot.RULE``;
- its sums are written in the output's own layout, so the copy out is elementwise and
  MetaSchedule inlines it and fuses the epilogue (bias, activation) into the tiles;
- the rounding block carries ``schedule_rule = bf16_dot.ROUND_RULE``: it stays at the
  root, computed whole before the reduction (inlined into the reduction, it would turn
  the input into an expression the intrinsic does not match, and the schedule would not
  be tensorized).
"""

from __future__ import annotations

from tuner.engine.bf16_dot import LANES, PAIR, ROUND_RULE, RULE

#: Relax's ``OpPatternKind.kOutEWiseFusable``: what TVM's own conv2d and matmul are.
OUT_ELEMWISE_FUSABLE = 4


def _i64(*dims: int) -> tuple:
    """Dimensions as int64 constants, as Relax's shapes are (a TIR function whose buffers
    are int32-shaped does not fuse with its neighbours)."""
    from tvm import tirx

    return tuple(tirx.IntImm("int64", int(d)) for d in dims)


def bf16_bits(x):
    """An f32 value rounded to bf16, to nearest even, as its ``uint16`` bits: the integer
    arithmetic of TVM's own f32 -> bf16 cast (the rounded inputs' buffer is ``uint16``:
    see :mod:`tuner.engine.bf16_dot`)."""
    from tvm import tirx

    u32 = tirx.reinterpret("uint32", x)
    one, bias, sixteen = (tirx.const(v, "uint32") for v in (1, 0x7FFF, 16))
    return ((u32 + (((u32 >> sixteen) & one) + bias)) >> sixteen).astype("uint16")


def bf16_value(bits):
    """The f32 value of bf16 bits (the form the intrinsic's description matches)."""
    from tvm import tirx

    return tirx.reinterpret("float32", bits.astype("uint32") << tirx.const(16, "uint32"))


def pack_conv_weight(weight):
    """``OHWI`` f32 weight ``[O, KH, KW, C]`` -> bf16 ``[O/16, KH, KW, C/2, 16, 2]``."""
    from tvm import te, topi

    o, kh, kw, c = (int(d) for d in weight.shape)
    split = topi.reshape(weight, [o // LANES, LANES, kh, kw, c // PAIR, PAIR])
    packed = topi.transpose(split, [0, 2, 3, 4, 1, 5])
    return te.compute(packed.shape, lambda *i: packed(*i).astype("bfloat16"),
                      name="pack_bf16")


def pack_dense_weight(weight):
    """``K x N`` f32 weight -> bf16 ``[N/16, K/2, 16, 2]``."""
    from tvm import te, topi

    k, n = (int(d) for d in weight.shape)
    split = topi.reshape(weight, [k // PAIR, PAIR, n // LANES, LANES])
    packed = topi.transpose(split, [2, 0, 3, 1])
    return te.compute(packed.shape, lambda *i: packed(*i).astype("bfloat16"),
                      name="pack_bf16")


def conv2d_nhwc(data, packed, strides, padding, dilation):
    """A 2-D convolution of NHWC f32 data by a packed bf16 weight, f32 sums and out.

    Args:
        data: ``[N, H, W, C]`` f32.
        packed: ``[O/16, KH, KW, C/2, 16, 2]`` bf16 (:func:`pack_conv_weight`).
        strides: ``(sh, sw)``.
        padding: ``(top, left, bottom, right)``.
        dilation: ``(dh, dw)``.

    Returns:
        ``[N, OH, OW, O]`` f32.
    """
    from tvm import te, tirx

    n, h, w, _ = (int(d) for d in data.shape)
    oo, kh, kw, cc, _, _ = (int(d) for d in packed.shape)
    sh, sw = strides
    top, left, bottom, right = padding
    dh, dw = dilation
    hp, wp = h + top + bottom, w + left + right
    oh = (hp - (kh - 1) * dh - 1) // sh + 1
    ow = (wp - (kw - 1) * dw - 1) // sw + 1
    zero = tirx.const(0, "uint16")
    rounded = te.compute(
        _i64(n, hp, wp, cc, PAIR),
        lambda b, y, x, c, i: tirx.if_then_else(
            tirx.all(y >= top, y < top + h, x >= left, x < left + w),
            bf16_bits(data[b, y - top, x - left, c * PAIR + i]), zero),
        name="to_bf16", attrs={"schedule_rule": ROUND_RULE})
    rh = te.reduce_axis((*_i64(0, kh),), "rh")
    rw = te.reduce_axis((*_i64(0, kw),), "rw")
    rc = te.reduce_axis((*_i64(0, cc),), "rc")
    ri = te.reduce_axis((*_i64(0, PAIR),), "ri")
    blocked = te.compute(
        _i64(n, oh, ow, oo, LANES),
        lambda b, y, x, co, ci: te.sum(
            bf16_value(rounded[b, y * sh + rh * dh, x * sw + rw * dw, rc, ri])
            * packed[co, rh, rw, rc, ci, ri].astype("float32"),
            axis=[rh, rw, rc, ri]),
        name="conv2d_nhwc_bf16", attrs={"schedule_rule": RULE})
    return te.compute(_i64(n, oh, ow, oo * LANES),
                      lambda b, y, x, c: blocked[b, y, x, c // LANES, c % LANES],
                      name="conv2d_nhwc_bf16_out")


def dense(data, packed):
    """``M x K`` f32 times a packed bf16 weight, f32 sums and out.

    Args:
        data: ``[M, K]`` f32.
        packed: ``[N/16, K/2, 16, 2]`` bf16 (:func:`pack_dense_weight`).

    Returns:
        ``[M, N]`` f32.
    """
    from tvm import te

    m = int(data.shape[0])
    no, kk, _, _ = (int(d) for d in packed.shape)
    rounded = te.compute(_i64(m, kk, PAIR), lambda i, k, j: bf16_bits(data[i, k * PAIR + j]),
                         name="to_bf16", attrs={"schedule_rule": ROUND_RULE})
    rk = te.reduce_axis((*_i64(0, kk),), "rk")
    ri = te.reduce_axis((*_i64(0, PAIR),), "ri")
    blocked = te.compute(
        _i64(m, no, LANES),
        lambda i, jo, ji: te.sum(
            bf16_value(rounded[i, rk, ri]) * packed[jo, rk, ji, ri].astype("float32"),
            axis=[rk, ri]),
        name="dense_bf16", attrs={"schedule_rule": RULE})
    return te.compute(_i64(m, no * LANES), lambda i, j: blocked[i, j // LANES, j % LANES],
                      name="dense_bf16_out")


def prim_func(compute, shapes: list[list[int]], *args, name: str):
    """The TIR function of ``compute`` (:func:`conv2d_nhwc` or :func:`dense`) on an f32
    input and a packed bf16 weight of ``shapes``, its blocks shaped as the module says.

    Args:
        compute: The TE compute.
        shapes: The inputs' shapes (data, packed weight).
        *args: The compute's other arguments (strides, padding, ...).
        name: The reduction block's name (``conv2d_nhwc_bf16`` or ``dense_bf16``).
    """
    from tvm import te
    from tvm.s_tir import Schedule

    inputs = [te.placeholder(_i64(*shape), dtype, name=n)
              for shape, dtype, n in zip(shapes, ("float32", "bfloat16"), ("data", "weight"),
                                         strict=True)]
    out = compute(*inputs, *args)
    sch = Schedule(te.create_prim_func([*inputs, out]))
    for block, size in ((name, LANES), ("to_bf16", PAIR)):
        sch.transform_layout(sch.get_sblock(block), ("write", 0), _merge_last(size))
    # a reduction whose output elementwise ops may fuse into (Relax's analysis calls the
    # function opaque, for the rounding block's store)
    return sch.mod["main"].with_attr("op_pattern", OUT_ELEMWISE_FUSABLE)


def _merge_last(size: int):
    """The index map ``(..., a, b) -> (..., a * size + b)``."""

    def merge(*i):
        return (*i[:-2], i[-2] * size + i[-1])

    return merge
