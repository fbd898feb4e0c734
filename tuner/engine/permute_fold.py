"""Transposes that cancel, folded away after the NHWC conversion.

A network that permutes its own tensors (ConvNeXt runs each block's LayerNorm and MLP
channels-last: ``permute(0, 2, 3, 1)`` ... ``permute(0, 3, 1, 2)``, then scales and adds its
residual in NCHW) meets ``relax.transform.ConvertLayout``'s transposes around every NHWC
convolution. The conversion leaves them side by side: an identity ``permute_dims`` before
each LayerNorm, an NHWC-to-NCHW transpose followed at once by its inverse, and the residual
scale and add computed in NCHW between a transpose and its inverse. In convnext-atto tuned
for 128 trials on the 2-core EPYC these were 14 kernels of their own
(docs/lab/compile/README.md). :func:`fold_permutes` moves each transpose below the
elementwise op it feeds (when the op's other operand is a constant or the same transpose of
another tensor) and merges consecutive transposes, dropping those that compose to the
identity.
"""

from __future__ import annotations

from collections.abc import Sequence

# binary elementwise operators a transpose of both operands commutes with
ELEMENTWISE = ("relax.add", "relax.subtract", "relax.multiply", "relax.divide",
               "relax.maximum", "relax.minimum", "relax.power")
MAX_ROUNDS = 64  # each round moves every transpose one op down; networks need a few


def _axes(call) -> list[int] | None:
    """The permutation of a ``permute_dims`` call (``None`` axes: reversed), ``None`` when
    its input's rank is not known."""
    axes = call.attrs.axes
    if axes is not None:
        return [int(a) for a in axes]
    ndim = _ndim(call.args[0])
    return None if ndim < 0 else list(reversed(range(ndim)))


def _ndim(expr) -> int:
    """The rank of a tensor expression, -1 where it is not known."""
    try:
        return int(expr.ty.ndim)  # the struct info (``ty`` in TVM 0.27)
    except (AttributeError, TypeError, ValueError):
        return -1


def _shape(expr) -> list[int]:
    """The static shape of a tensor expression (a constant's)."""
    return [int(d) for d in expr.ty.shape]


def compose(first: Sequence[int], second: Sequence[int]) -> list[int]:
    """The axes of ``permute_dims(permute_dims(x, first), second)`` as one permutation."""
    return [int(first[i]) for i in second]


def inverse(axes: Sequence[int]) -> list[int]:
    """The axes that undo ``permute_dims(x, axes)``."""
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[int(a)] = i
    return inv


def fold_permutes():
    """A function pass: transposes below elementwise ops, consecutive ones merged, the
    identity dropped. Other calls are left as they are; the result computes the same."""
    import tvm_ffi
    from tvm import relax
    from tvm.relax.dpl import is_const, is_op, rewrite_call, wildcard

    x, xa, xb = wildcard(), wildcard(), wildcard()
    permute = is_op("relax.permute_dims")(x)
    double = is_op("relax.permute_dims")(permute)
    pa, pb = is_op("relax.permute_dims")(xa), is_op("relax.permute_dims")(xb)
    const = is_const()
    both, right_const, left_const = (_any_op(is_op, ELEMENTWISE, pa, pb),
                                     _any_op(is_op, ELEMENTWISE, pa, const),
                                     _any_op(is_op, ELEMENTWISE, const, pa))

    def merge(expr, matches):
        first, second = _axes(matches[permute]), _axes(expr)
        if first is None or second is None:
            return expr
        axes = compose(first, second)
        if axes == list(range(len(axes))):
            return matches[x]
        return relax.op.permute_dims(matches[x], axes)

    def identity(expr, matches):
        axes = _axes(expr)
        return matches[x] if axes is not None and axes == list(range(len(axes))) else expr

    def sink_both(expr, matches):
        first, second = matches[pa], matches[pb]
        axes, ndim = _axes(first), _ndim(expr)
        if (axes is None or axes != _axes(second) or ndim < 0
                or _ndim(first) != ndim or _ndim(second) != ndim):
            return expr
        return relax.op.permute_dims(
            relax.Call(expr.op, [matches[xa], matches[xb]], expr.attrs), axes)

    def sink_const(constant_first: bool):
        def rewrite(expr, matches):
            moved, constant = matches[pa], matches[const]
            axes, ndim, rank = _axes(moved), _ndim(expr), _ndim(constant)
            if axes is None or ndim < 0 or _ndim(moved) != ndim or not 0 <= rank <= ndim:
                return expr
            if rank > 0:  # broadcast to the full rank, then to the layout before the transpose
                shape = [1] * (ndim - rank) + _shape(constant)
                constant = relax.op.permute_dims(relax.op.reshape(constant, shape),
                                                 inverse(axes))
            args = [constant, matches[xa]] if constant_first else [matches[xa], constant]
            return relax.op.permute_dims(relax.Call(expr.op, args, expr.attrs), axes)

        return rewrite

    rules = [(both, sink_both), (right_const, sink_const(False)),
             (left_const, sink_const(True)), (double, merge), (permute, identity)]

    @relax.transform.function_pass(opt_level=0, name="FoldPermutes")
    def transform(func, _mod, _ctx):  # the pass infrastructure copies the module
        for _ in range(MAX_ROUNDS):
            before = func
            for pattern, rewrite in rules:
                func = rewrite_call(pattern, rewrite, func)
            if tvm_ffi.structural_equal(before, func):
                break
        return func

    return transform


def _any_op(is_op, names: Sequence[str], lhs, rhs):
    """A pattern matching a call of any of ``names`` on (``lhs``, ``rhs``)."""
    pattern = is_op(names[0])(lhs, rhs)
    for name in names[1:]:
        pattern = pattern | is_op(name)(lhs, rhs)
    return pattern
