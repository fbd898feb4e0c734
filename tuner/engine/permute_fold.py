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

from tuner.engine.relax_rewrite import any_op, fixpoint_pass, ndim, static_shape

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
    rank = ndim(call.args[0])
    return None if rank < 0 else list(reversed(range(rank)))


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
    from tvm import relax
    from tvm.relax.dpl import is_const, is_op, wildcard

    x, xa, xb = wildcard(), wildcard(), wildcard()
    permute = is_op("relax.permute_dims")(x)
    double = is_op("relax.permute_dims")(permute)
    pa, pb = is_op("relax.permute_dims")(xa), is_op("relax.permute_dims")(xb)
    const = is_const()
    both = any_op(ELEMENTWISE, pa, pb)
    right_const, left_const = any_op(ELEMENTWISE, pa, const), any_op(ELEMENTWISE, const, pa)

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
        axes, rank_out = _axes(first), ndim(expr)
        if (axes is None or axes != _axes(second) or rank_out < 0
                or ndim(first) != rank_out or ndim(second) != rank_out):
            return expr
        return relax.op.permute_dims(
            relax.Call(expr.op, [matches[xa], matches[xb]], expr.attrs), axes)

    def sink_const(constant_first: bool):
        def rewrite(expr, matches):
            moved, constant = matches[pa], matches[const]
            axes, rank_out, rank = _axes(moved), ndim(expr), ndim(constant)
            if (axes is None or rank_out < 0 or ndim(moved) != rank_out
                    or not 0 <= rank <= rank_out):
                return expr
            if rank > 0:  # broadcast to the full rank, then to the layout before the transpose
                shape = [1] * (rank_out - rank) + static_shape(constant)
                constant = relax.op.permute_dims(relax.op.reshape(constant, shape),
                                                 inverse(axes))
            args = [constant, matches[xa]] if constant_first else [matches[xa], constant]
            return relax.op.permute_dims(relax.Call(expr.op, args, expr.attrs), axes)

        return rewrite

    rules = [(both, sink_both), (right_const, sink_const(False)),
             (left_const, sink_const(True)), (double, merge), (permute, identity)]
    return fixpoint_pass("FoldPermutes", rules, MAX_ROUNDS)
