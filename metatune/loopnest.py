"""Read a scheduled TIR ``PrimFunc`` into loops with their loop context vectors.

This is the TIR counterpart of AutoTVM's itervar features (paper section 3): for every
loop of the scheduled function, its extent, kind and unroll annotations, nesting
position, top-down and bottom-up extent products, and for the buffers of its main block
the stride of the loop in each buffer, whether the loop reuses it, and the bytes the
loop touches (inner loops included); plus arithmetic counts. Each loop is also located in a
canonical frame (stage, original axis role, tile level) that the super-graph template uses.

Only statements and the few expressions that matter are visited, so encoding keeps up
with the search (``experiments/encoder.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

STAGES = ("main", "init", "pre", "post")
ROLES = ("n", "f", "y", "x", "rc", "ry", "rx")
LEVELS = 4
N_BUFFERS = 3
#: Loop context vector layout (see :func:`_fill_features`).
LOOP_FEATURES = (
    "log_extent", "serial", "parallel", "vectorized", "unrolled", "thread_bound",
    "log_unroll_step", "unroll_explicit", "depth", "innermost", "log_top_down",
    "log_bottom_up", "fused_axes",
    *[f"buf{b}_{k}" for b in range(N_BUFFERS) for k in ("log_stride", "reuse", "log_bytes")],
    "log_ops",
)

# Block variable names TOPI gives unambiguously (winograd's bgemm: eps, nu, co, p); the
# others (yy, xx, i, j, i0, ...) are placed by position among the remaining roles.
_SPATIAL_NAMES = {"nn": "n", "b": "n", "batch": "n", "p": "n", "ff": "f", "co": "f",
                  "oc": "f", "eps": "y", "nu": "x"}
_REDUCE_NAMES = {"rc": "rc", "dc": "rc", "ci": "rc", "k": "rc", "ry": "ry", "dh": "ry",
                 "di": "ry", "r_a": "ry", "r_kh": "ry", "rx": "rx", "dw": "rx", "dj": "rx",
                 "r_b": "rx", "r_kw": "rx"}
_SPATIAL_BY_COUNT = {1: ("x",), 2: ("y", "f"), 3: ("n", "f", "x"), 4: ("n", "f", "y", "x")}
_REDUCE_BY_COUNT = {1: ("rc",), 2: ("ry", "rx"), 3: ("rc", "ry", "rx")}
#: TOPI's winograd computes its main GEMM in a block of this name: that is the anchor.
_WINOGRAD_GEMM = "bgemm"


@dataclass
class Block:
    """A leaf block: bindings, buffer accesses and arithmetic, as plain Python data."""

    name: str
    order: int
    roles: dict[str, str]                      # block var name -> role
    is_reduce: bool
    domain: float                              # product of iter var extents
    bindings: dict[str, dict[str, float]]      # block var -> {loop var: coefficient}
    accesses: list[tuple]                      # (is_write, shape, [{block var: coef}], bytes)
    ops: int
    loops: list[int] = field(default_factory=list)  # enclosing loop indices, outer first


@dataclass
class Loop:
    """One loop of the scheduled function."""

    var: str
    extent: int
    kind: int
    unroll_step: int
    unroll_explicit: int
    depth: int
    parent: int
    blocks: list[int] = field(default_factory=list)
    stage: str = "main"
    role: str | None = None
    level: int = 0
    fused: int = 1
    features: list[float] = field(default_factory=list)


@dataclass
class LoopNest:
    """The loops (outer first, depth-first order) and leaf blocks of a function."""

    loops: list[Loop]
    blocks: list[Block]
    anchor: int


def _linear(expr, out: dict[str, float], scale: float = 1.0) -> None:
    """Add the linear coefficients of ``expr`` (in its variables) to ``out``."""
    from tvm import tirx

    if isinstance(expr, tirx.Var):
        out[expr.name] = out.get(expr.name, 0.0) + scale
    elif isinstance(expr, tirx.Add):
        _linear(expr.a, out, scale)
        _linear(expr.b, out, scale)
    elif isinstance(expr, tirx.Sub):
        _linear(expr.a, out, scale)
        _linear(expr.b, out, -scale)
    elif isinstance(expr, tirx.Mul):
        if isinstance(expr.b, tirx.IntImm):
            _linear(expr.a, out, scale * expr.b.value)
        elif isinstance(expr.a, tirx.IntImm):
            _linear(expr.b, out, scale * expr.a.value)
    elif isinstance(expr, tirx.FloorDiv) and isinstance(expr.b, tirx.IntImm):
        _linear(expr.a, out, scale / max(1, expr.b.value))
    elif isinstance(expr, tirx.FloorMod):
        _linear(expr.a, out, scale)
    elif isinstance(expr, tirx.Cast):
        _linear(expr.value, out, scale)


def _count_ops(expr) -> int:
    """Arithmetic operations in a store's value (loads and constants are free)."""
    from tvm import ir, tirx

    if isinstance(expr, (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Max, tirx.Min,
                         tirx.FloorDiv, tirx.FloorMod)):
        return 1 + _count_ops(expr.a) + _count_ops(expr.b)
    if isinstance(expr, ir.expr.Call):
        return 1 + sum(_count_ops(a) for a in expr.args)
    if isinstance(expr, tirx.Select):
        return 1 + _count_ops(expr.true_value) + _count_ops(expr.false_value)
    if isinstance(expr, tirx.Cast):
        return _count_ops(expr.value)
    return 0


def _roles(iter_vars) -> tuple[dict[str, str], bool, float]:
    """Role of each block var (by TOPI name, else by position), reduce flag, domain."""
    spatial, reduce = [], []
    domain = 1.0
    for iv in iter_vars:
        (reduce if int(iv.iter_type) == 2 else spatial).append(iv.var.name)
        domain *= max(1, int(iv.dom.extent)) if hasattr(iv.dom.extent, "value") else 1
    roles: dict[str, str] = {}
    for names, by_name, by_count in ((spatial, _SPATIAL_NAMES, _SPATIAL_BY_COUNT),
                                     (reduce, _REDUCE_NAMES, _REDUCE_BY_COUNT)):
        named = {n: by_name.get(n[2:] if n.startswith("v_") else n) for n in names}
        used = set(named.values())
        free = [r for r in by_count.get(len(names), ()) if r not in used]
        for name in names:
            roles[name] = named[name] or (free.pop(0) if free else None)
    return roles, bool(reduce), domain


def _read_block(realize, order: int) -> Block:
    from tvm import tirx

    block = realize.block
    roles, is_reduce, domain = _roles(block.iter_vars)
    bindings: dict[str, dict[str, float]] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values, strict=False):
        coefs: dict[str, float] = {}
        _linear(value, coefs)
        bindings[iv.var.name] = coefs
    accesses = []
    for is_write, regions in ((True, block.writes), (False, block.reads)):
        for region in regions:
            buf = region.source if hasattr(region, "source") else region.buffer
            shape = [int(s) if hasattr(s, "value") else 1 for s in buf.shape]
            index = []
            for rng in region.region:
                coefs: dict[str, float] = {}
                _linear(rng.min, coefs)
                index.append(coefs)
            digits = "".join(ch for ch in str(buf.dtype) if ch.isdigit())
            accesses.append((is_write, shape, index, max(1, int(digits or 32) // 8)))
    body = block.body
    ops = _count_ops(body.value) if isinstance(body, tirx.BufferStore) else 0
    return Block(block.name_hint, order, roles, is_reduce, domain, bindings, accesses, ops)


def read_loop_nest(func) -> LoopNest:
    """Walk a scheduled ``PrimFunc`` and collect its loops and leaf blocks.

    Args:
        func: A scheduled ``tvm.tirx.PrimFunc`` (MetaSchedule candidate, postprocessed).

    Returns:
        The :class:`LoopNest` with canonical frames and loop context vectors filled in.
    """
    from tvm import s_tir, tirx

    loops: list[Loop] = []
    blocks: list[Block] = []
    stack: list[int] = []

    def visit(stmt) -> None:
        if isinstance(stmt, tirx.For):
            ann = stmt.annotations
            step = (int(ann["pragma_auto_unroll_max_step"])
                    if "pragma_auto_unroll_max_step" in ann else 0)
            explicit = int(ann["pragma_unroll_explicit"]) if "pragma_unroll_explicit" in ann else 0
            ext = int(stmt.extent) if hasattr(stmt.extent, "value") else 1
            loops.append(Loop(stmt.loop_var.name, ext, int(stmt.kind), step, explicit,
                              len(stack), stack[-1] if stack else -1))
            stack.append(len(loops) - 1)
            visit(stmt.body)
            stack.pop()
        elif isinstance(stmt, s_tir.SBlockRealize):
            inner = stmt.block.body
            if _has_block(inner):
                visit(inner)
                return
            blk = _read_block(stmt, len(blocks))
            blk.loops = list(stack)
            for i in stack:
                loops[i].blocks.append(len(blocks))
            blocks.append(blk)
        elif isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                visit(s)
        elif isinstance(stmt, tirx.IfThenElse):
            visit(stmt.then_case)
            if stmt.else_case is not None:
                visit(stmt.else_case)
        elif hasattr(stmt, "body"):
            visit(stmt.body)

    visit(func.body)
    anchor = _anchor(blocks)
    _assign_frames(loops, blocks, anchor)
    _fill_features(loops, blocks, anchor)
    return LoopNest(loops, blocks, anchor)


def _has_block(stmt) -> bool:
    from tvm import s_tir, tirx

    if isinstance(stmt, s_tir.SBlockRealize):
        return True
    if isinstance(stmt, tirx.SeqStmt):
        return any(_has_block(s) for s in stmt.seq)
    if isinstance(stmt, tirx.For):
        return _has_block(stmt.body)
    if isinstance(stmt, tirx.IfThenElse):
        return _has_block(stmt.then_case) or (
            stmt.else_case is not None and _has_block(stmt.else_case))
    return hasattr(stmt, "body") and not isinstance(stmt, tirx.BufferStore) and _has_block(
        stmt.body)


def _anchor(blocks: list[Block]) -> int:
    """The main compute block: the largest reduction block (else the largest block)."""
    if not blocks:
        return -1
    for i, blk in enumerate(blocks):
        if blk.name == _WINOGRAD_GEMM:
            return i
    return max(range(len(blocks)), key=lambda i: (blocks[i].is_reduce and
                                                  not blocks[i].name.endswith("_init"),
                                                  blocks[i].domain))


def _assign_frames(loops: list[Loop], blocks: list[Block], anchor: int) -> None:
    """Stage, role, tile level and fused-axis count of every loop."""
    for loop in loops:
        if not loop.blocks:
            continue
        own = anchor if anchor in loop.blocks else loop.blocks[0]
        blk = blocks[own]
        if own == anchor:
            loop.stage = "main"
        elif blk.name.endswith("_init"):
            loop.stage = "init"
        else:
            loop.stage = "pre" if blk.order < blocks[anchor].order else "post"
        axes = [v for v, coefs in blk.bindings.items() if coefs.get(loop.var)]
        loop.fused = max(1, len(axes))
        if axes:
            loop.role = blk.roles.get(axes[0])
    # tile level: how many loops of the same role enclose it in its block's loop chain
    for i, loop in enumerate(loops):
        if not loop.blocks:
            continue
        own = anchor if anchor in loop.blocks else loop.blocks[0]
        chain = blocks[own].loops
        outer = chain[: chain.index(i)]
        loop.level = min(LEVELS - 1, sum(loops[k].role == loop.role for k in outer))


def _log2(x: float) -> float:
    return math.log2(1.0 + abs(x))


def _block_tables(blk: Block, loops: list[Loop]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per buffer slot of a block: strides and touched spans along its loop chain.

    Vectorized over the chain's loops; each value is summed in the same order as a plain
    Python sum over the buffer's dimensions and the index's variables would (no matrix
    product), so the features come out the same to the last bit.

    Returns:
        Up to :data:`N_BUFFERS` pairs ``(steps, suffix_bytes)`` of ``len(blk.loops)``
        float arrays: ``steps[j]`` is the element stride of chain loop ``j`` in the buffer,
        ``suffix_bytes[j]`` the bytes touched while chain loop ``j`` runs (all its
        iterations, inner loops included).
    """
    chain_vars = [loops[k].var for k in blk.loops]
    n = len(chain_vars)
    extents = np.array([loops[k].extent - 1 for k in blk.loops], dtype=np.float64)
    # per block var: how far it moves per step of each chain loop
    binding = {v: np.array([coefs.get(var, 0.0) for var in chain_vars], dtype=np.float64)
               for v, coefs in blk.bindings.items()}
    writes = [a for a in blk.accesses if a[0]]
    reads = sorted((a for a in blk.accesses if not a[0] and not any(
        w[1] == a[1] and w[2] == a[2] for w in writes)), key=lambda a: -math.prod(a[1]))
    tables = []
    for _, shape, index, nbytes in (writes[:1] + reads)[:N_BUFFERS]:
        coef = np.zeros((len(shape), n))  # [buffer dim, chain position]
        for d, idx in enumerate(index[:len(shape)]):
            for v, c in idx.items():
                if v in binding:  # other variables do not move with the chain's loops
                    coef[d] += c * binding[v]
        steps = np.zeros(n)
        for d in range(len(shape)):
            steps += coef[d] * math.prod(shape[d + 1:])
        # spans grow from the innermost chain loop outwards (a running sum from 1),
        # capped by the buffer's shape
        grow = np.abs(coef[:, ::-1]) * extents[::-1]
        widths = np.cumsum(np.concatenate([np.ones((len(shape), 1)), grow], axis=1),
                           axis=1)[:, :0:-1]
        capped = np.minimum(widths, np.asarray(shape, dtype=np.float64)[:, None])
        tables.append((steps, nbytes * np.prod(capped, axis=0)))
    return tables


def _fill_features(loops: list[Loop], blocks: list[Block], anchor: int) -> None:
    """Compute every loop's context vector (layout: :data:`LOOP_FEATURES`)."""
    tables = [_block_tables(b, loops) for b in blocks]
    has_child = {loop.parent for loop in loops}
    top = []
    for loop in loops:
        top.append(loop.extent * (top[loop.parent] if loop.parent >= 0 else 1))
    for i, loop in enumerate(loops):
        kind = [0.0] * 5
        kind[min(loop.kind, 4)] = 1.0
        feats = [_log2(loop.extent), *kind, _log2(loop.unroll_step), float(loop.unroll_explicit),
                 loop.depth / 16.0, float(i not in has_child), _log2(top[i])]
        if not loop.blocks:
            loop.features = feats + [0.0, float(loop.fused)] + [0.0] * (3 * N_BUFFERS + 1)
            continue
        own = anchor if anchor in loop.blocks else loop.blocks[0]
        blk = blocks[own]
        j = blk.loops.index(i)
        bottom = math.prod(loops[k].extent for k in blk.loops[j:])
        feats += [_log2(bottom), float(loop.fused)]
        for steps, suffix in tables[own]:
            feats += [_log2(steps[j]), float(steps[j] == 0), _log2(suffix[j])]
        feats += [0.0] * (3 * (N_BUFFERS - len(tables[own])))
        feats.append(_log2(blk.ops * bottom))
        loop.features = feats
