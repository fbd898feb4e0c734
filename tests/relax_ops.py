"""What the Relax graph-rewrite tests look at: the operators a module's ``main`` calls."""

from __future__ import annotations


def relax_ops(mod) -> list[str]:
    """The Relax operators ``mod["main"]`` calls, in post order (producers first)."""
    import tvm
    from tvm import relax

    ops: list[str] = []
    relax.analysis.post_order_visit(
        mod["main"], lambda e: ops.append(e.op.name)
        if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) else None)
    return ops
