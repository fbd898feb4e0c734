"""Which stored workloads are like a new task: the same kind of operator, the nearest shapes.

A workload's :class:`Signature` is read from its unscheduled TIR ``PrimFunc``:

- **kind**: its blocks in program order, each as ``(name, iteration kinds)``, e.g.
  ``(("pad_temp", "SSSS"), ("conv2d_nhwc", "SSSSRRR"), ("T_add", "SSSS"), ("compute",
  "SSSS"))`` (``S`` spatial, ``R`` reduction, ``O`` other). A schedule's trace names the
  blocks it transforms (``GetSBlock("conv2d_nhwc")``) and splits their loops in order, so
  a trace can only carry over between workloads of one kind. Task names (``fused_conv2d3_add2``)
  are no key: their numbering differs between networks.
- **extents**: every block's iteration extents, concatenated in the same order.

The distance of two signatures of one kind is the mean absolute difference of their
``log2`` extents (0: the same shapes; 1: every extent twice or half as large, on average);
of two kinds it is infinite. The exact same workload (equal structural hash) sorts first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Iteration kinds of a block variable, as TVM numbers them (``IterVar.iter_type``).
_ITER_KINDS = {0: "S", 2: "R"}


@dataclass(frozen=True)
class Signature:
    """What a workload is, for transfer.

    Attributes:
        kind: ``((block name, iteration kinds), ...)`` in program order.
        extents: Every block's iteration extents, concatenated in that order.
    """

    kind: tuple[tuple[str, str], ...]
    extents: tuple[int, ...]

    def describe(self) -> str:
        """The kind in one short line: the block names joined by ``+``."""
        return "+".join(name for name, _ in self.kind)


def _blocks(stmt, out: list) -> None:
    """Append ``(name, iteration kinds, extents)`` of every block under ``stmt``."""
    from tvm import s_tir, tirx

    if isinstance(stmt, s_tir.SBlockRealize):
        block = stmt.block
        if block.name_hint != "root":
            kinds = "".join(_ITER_KINDS.get(int(iv.iter_type), "O") for iv in block.iter_vars)
            extents = tuple(int(iv.dom.extent) if hasattr(iv.dom.extent, "value") else 0
                            for iv in block.iter_vars)
            out.append((block.name_hint, kinds, extents))
        if block.init is not None:
            _blocks(block.init, out)
        _blocks(block.body, out)
    elif isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _blocks(s, out)
    elif isinstance(stmt, tirx.IfThenElse):
        _blocks(stmt.then_case, out)
        if stmt.else_case is not None:
            _blocks(stmt.else_case, out)
    elif not isinstance(stmt, tirx.BufferStore) and hasattr(stmt, "body"):
        _blocks(stmt.body, out)


def signature(mod) -> Signature:
    """The :class:`Signature` of a task's ``IRModule`` (its ``main``, else its one function)
    or of a ``PrimFunc``."""
    func = mod
    if hasattr(mod, "functions"):
        funcs = dict(mod.functions.items())
        func = next((f for g, f in funcs.items() if g.name_hint == "main"),
                    next(iter(funcs.values())))
    blocks: list = []
    _blocks(func.body, blocks)
    return Signature(tuple((name, kinds) for name, kinds, _ in blocks),
                     tuple(e for _, _, extents in blocks for e in extents))


def distance(a: Signature, b: Signature) -> float:
    """Mean ``|log2 x - log2 y|`` over the extents of two signatures of one kind, else
    ``inf`` (see the module docstring)."""
    if a.kind != b.kind or len(a.extents) != len(b.extents):
        return math.inf
    if not a.extents:
        return 0.0
    return sum(abs(math.log2(max(1, x)) - math.log2(max(1, y)))
               for x, y in zip(a.extents, b.extents, strict=True)) / len(a.extents)
