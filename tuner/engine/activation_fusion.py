"""Activations, scales and residual adds moved above the reshapes around them, so they fuse
into the layer before.

PyTorch's ``nn.Linear`` on a 3-D or 4-D tensor imports into Relax as reshape to 2-D,
``matmul``, bias ``add``, reshape back; an activation after it (ConvNeXt's and BERT's GELU)
then reads the reshaped tensor, and the next layer reshapes its output to 2-D again:
``matmul -> add -> reshape -> gelu -> reshape -> matmul``. ``FuseOps`` fuses elementwise
ops into a matmul but stops at a reshape, so each GELU ran as a kernel of its own, a pass
over the layer's largest tensor (in convnext-atto the four GELU kernels were the largest
tasks after the matmuls; docs/lab/compile/README.md). An elementwise op of one tensor
computes the same on the tensor before a reshape as after it, so
:func:`activations_before_reshape` rewrites ``act(reshape(x))`` as ``reshape(act(x))``;
TVM's ``RemoveRedundantReshape`` then merges the two reshapes, which cancel, and the
activation fuses with the matmul and its bias. The same holds for a binary elementwise op
whose other operand has the reshaped shape (a residual: reshaped too, a view) or varies
along the last axis only (ConvNeXt's layer scale), when the reshape keeps the last axis:
``op(reshape(x), y)`` becomes ``reshape(op(x, y'))``, and the scale and the residual add
fuse into the matmul as well.
"""

from __future__ import annotations

from tuner.engine.relax_rewrite import any_op, fixpoint_pass, static_shape

#: Relax operators that act on each element of their one tensor argument alone
UNARY = ("relax.nn.gelu", "relax.nn.gelu_tanh", "relax.nn.silu", "relax.nn.relu",
         "relax.sigmoid", "relax.tanh", "relax.exp", "relax.erf")
MAX_ROUNDS = 32  # each round moves every op one reshape up; a network needs a few
#: Binary elementwise operators (with broadcasting)
BINARY = ("relax.add", "relax.subtract", "relax.multiply", "relax.divide",
          "relax.maximum", "relax.minimum")


def moved_operand_shape(before: list[int], after: list[int], other: list[int]
                        ) -> list[int] | None:
    """The shape to give ``other`` so that ``op(reshape(x, after), other)`` can be computed as
    ``reshape(op(x, other'), after)`` with ``x`` of shape ``before``; ``None`` where it
    cannot: the reshape must add axes and keep the last one, and ``other`` must have the
    shape ``after`` (reshaped like ``x``) or vary along the last axis alone (a broadcast
    vector).

    Args:
        before: ``x``'s shape.
        after: The reshape's target shape (the op's output shape).
        other: The other operand's shape.
    """
    if not before or not after or before[-1] != after[-1] or len(other) > len(after):
        return None
    if len(before) >= len(after):
        # only a reshape that adds axes (nn.Linear's 2-D result back to 3-D or 4-D) moves:
        # the reverse move would undo it, and the rewrite would never end
        return None
    if other == after:
        return list(before)
    if not other:
        return []  # a scalar broadcasts anywhere
    if all(d == 1 for d in other[:-1]) and other[-1] in (1, after[-1]):
        return [1] * (len(before) - 1) + [other[-1]]
    return None


def activations_before_reshape():
    """A pass: each ``act(reshape(x, shape))`` for an operator of :data:`UNARY` becomes
    ``reshape(act(x), shape)``, each ``op(reshape(x, shape), y)`` of :data:`BINARY` becomes
    ``reshape(op(x, y'), shape)`` where :func:`moved_operand_shape` allows it, then
    redundant reshapes are removed. Computes the same."""
    import tvm
    from tvm import relax
    from tvm.relax.dpl import is_op, wildcard

    x, shape, other = wildcard(), wildcard(), wildcard()
    reshape = is_op("relax.reshape")(x, shape)
    unary = any_op(UNARY, reshape)
    left, right = any_op(BINARY, reshape, other), any_op(BINARY, other, reshape)

    def move_unary(expr, matches):
        moved = relax.Call(expr.op, [matches[x]], expr.attrs)
        return relax.op.reshape(moved, matches[reshape].args[1])

    def move_binary(reshaped_first: bool):
        def rewrite(expr, matches):
            data, operand = matches[x], matches[other]
            before, after = static_shape(data), static_shape(expr)
            theirs = static_shape(operand)
            if before is None or after is None or theirs is None:
                return expr
            if static_shape(matches[reshape]) != after:  # the reshaped operand is broadcast
                return expr
            target = moved_operand_shape(before, after, theirs)
            if target is None:
                return expr
            if target != theirs:
                operand = relax.op.reshape(operand, target)
            args = [data, operand] if reshaped_first else [operand, data]
            return relax.op.reshape(relax.Call(expr.op, args, expr.attrs), after)

        return rewrite

    rules = [(unary, move_unary), (left, move_binary(True)), (right, move_binary(False))]
    move = fixpoint_pass("ActivationsBeforeReshape", rules, MAX_ROUNDS)
    return tvm.transform.Sequential([move, relax.transform.RemoveRedundantReshape()],
                                    name="ActivationsBeforeReshapeFused")
