"""Activations moved above the reshapes around them, so they fuse into the layer before.

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
activation fuses with the matmul and its bias.
"""

from __future__ import annotations

#: Relax operators that act on each element of their one tensor argument alone
UNARY = ("relax.nn.gelu", "relax.nn.gelu_tanh", "relax.nn.silu", "relax.nn.relu",
         "relax.sigmoid", "relax.tanh", "relax.exp", "relax.erf")


def activations_before_reshape():
    """A pass: each ``act(reshape(x, shape))`` for an operator of :data:`UNARY` becomes
    ``reshape(act(x), shape)``, then redundant reshapes are removed. Computes the same."""
    import tvm
    from tvm import relax
    from tvm.relax.dpl import is_op, rewrite_call, wildcard

    x, shape = wildcard(), wildcard()
    reshape = is_op("relax.reshape")(x, shape)
    pattern = is_op(UNARY[0])(reshape)
    for name in UNARY[1:]:
        pattern = pattern | is_op(name)(reshape)

    def rewrite(expr, matches):
        moved = relax.Call(expr.op, [matches[x]], expr.attrs)
        return relax.op.reshape(moved, matches[reshape].args[1])

    @relax.transform.function_pass(opt_level=0, name="ActivationsBeforeReshape")
    def move(func, _mod, _ctx):  # the pass infrastructure copies the module
        return rewrite_call(pattern, rewrite, func)

    return tvm.transform.Sequential([move, relax.transform.RemoveRedundantReshape()],
                                    name="ActivationsBeforeReshapeFused")
