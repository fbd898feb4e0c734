"""bf16 convolution and dense as TE computes the ``vdpbf16ps`` intrinsic can tile.

Both read bf16 inputs, accumulate in f32 and write f32. The weight is packed so that the
sixteen output channels and two reduction elements of one instruction are contiguous
(``[..., 16, 2]``, see :mod:`tuner.engine.bf16_dot`); packing runs on the f32 weight
constant and is folded at compile time. The reduction block iterates the output channel
as ``(channel // 16, channel % 16)``, so that MetaSchedule's auto-tensorization finds the
intrinsic's shape, and writes the plain NHWC (or ``M x N``) layout (:func:`prim_func`
rewrites its buffer), so that the copy to the output is elementwise and MetaSchedule
inlines it and fuses the epilogue (bias, activation) into the tiles as for f32. The
reduction block carries ``schedule_rule = bf16_dot.RULE``.
"""

from __future__ import annotations

from tuner.engine.bf16_dot import LANES, PAIR, RULE


def _i64(*dims: int) -> tuple:
    """Dimensions as int64 constants, as Relax's shapes are (a TIR function whose buffers
    are int32-shaped does not fuse with its neighbours)."""
    from tvm import tirx

    return tuple(tirx.IntImm("int64", int(d)) for d in dims)


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


def to_bf16(x, pad: tuple[int, int, int, int] | None = None):
    """An f32 tensor rounded to bf16 (TVM's cast: round to nearest even), an NHWC one
    zero-padded by ``pad`` (top, left, bottom, right) on the way: the convolution then
    reads its input as it is stored (a padding stage inside the convolution's function
    may be inlined into the reduction, whose input then no longer matches the intrinsic).
    """
    from tvm import te, topi

    if pad is not None and any(pad):
        top, left, bottom, right = pad
        x = topi.nn.pad(x, [0, top, left, 0], [0, bottom, right, 0])
    return te.compute(x.shape, lambda *i: x(*i).astype("bfloat16"), name="to_bf16")


def conv2d_nhwc(data, packed, strides, dilation):
    """A 2-D convolution, NHWC bf16 data (padded already, :func:`to_bf16`) and packed
    bf16 weight, f32 accumulate and out.

    Args:
        data: ``[N, H, W, C]`` bf16, padded.
        packed: ``[O/16, KH, KW, C/2, 16, 2]`` bf16 (:func:`pack_conv_weight`).
        strides: ``(sh, sw)``.
        dilation: ``(dh, dw)``.

    Returns:
        ``[N, OH, OW, O]`` f32.
    """
    from tvm import te

    n, h, w, _ = (int(d) for d in data.shape)
    oo, kh, kw, cc, _, _ = (int(d) for d in packed.shape)
    sh, sw = strides
    dh, dw = dilation
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (w - (kw - 1) * dw - 1) // sw + 1
    rh = te.reduce_axis((*_i64(0, kh),), "rh")
    rw = te.reduce_axis((*_i64(0, kw),), "rw")
    rc = te.reduce_axis((*_i64(0, cc),), "rc")
    ri = te.reduce_axis((*_i64(0, PAIR),), "ri")
    blocked = te.compute(
        _i64(n, oh, ow, oo, LANES),
        lambda b, y, x, co, ci: te.sum(
            data[b, y * sh + rh * dh, x * sw + rw * dw, rc * PAIR + ri].astype("float32")
            * packed[co, rh, rw, rc, ci, ri].astype("float32"),
            axis=[rh, rw, rc, ri]),
        name="conv2d_nhwc_bf16", attrs={"schedule_rule": RULE})
    return te.compute(_i64(n, oh, ow, oo * LANES),
                      lambda b, y, x, c: blocked[b, y, x, c // LANES, c % LANES],
                      name="conv2d_nhwc_bf16_out")


def dense(data, packed):
    """``M x K`` bf16 times a packed bf16 weight, f32 accumulate and out.

    Args:
        data: ``[M, K]`` bf16.
        packed: ``[N/16, K/2, 16, 2]`` bf16 (:func:`pack_dense_weight`).

    Returns:
        ``[M, N]`` f32.
    """
    from tvm import te

    m = int(data.shape[0])
    no, kk, _, _ = (int(d) for d in packed.shape)
    rk = te.reduce_axis((*_i64(0, kk),), "rk")
    ri = te.reduce_axis((*_i64(0, PAIR),), "ri")
    blocked = te.compute(
        _i64(m, no, LANES),
        lambda i, jo, ji: te.sum(
            data[i, rk * PAIR + ri].astype("float32") * packed[jo, rk, ji, ri].astype("float32"),
            axis=[rk, ri]),
        name="dense_bf16", attrs={"schedule_rule": RULE})
    return te.compute(_i64(m, no * LANES), lambda i, j: blocked[i, j // LANES, j % LANES],
                      name="dense_bf16_out")


def prim_func(compute, shapes: list[list[int]], *args, name: str):
    """The TIR function of ``compute`` (:func:`conv2d_nhwc` or :func:`dense`) on bf16
    inputs of ``shapes``, its reduction block writing the output's layout.

    Args:
        compute: The TE compute.
        shapes: The inputs' shapes (data, packed weight).
        *args: The compute's other arguments (strides, padding, ...).
        name: The reduction block's name (``conv2d_nhwc_bf16`` or ``dense_bf16``).
    """
    from tvm import te
    from tvm.s_tir import Schedule

    inputs = [te.placeholder(_i64(*shape), "bfloat16", name=n)
              for shape, n in zip(shapes, ("data", "weight"), strict=True)]
    out = compute(*inputs, *args)
    sch = Schedule(te.create_prim_func([*inputs, out]))
    block = sch.get_sblock(name)
    sch.transform_layout(block, ("write", 0),
                         lambda *i: (*i[:-2], i[-2] * LANES + i[-1]))
    return sch.mod["main"]
