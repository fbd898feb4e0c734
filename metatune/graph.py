"""Loop-nest graphs of scheduled kernels (paper section 3, Figure 2), as PyG ``Data``.

Nodes: one root, one *for* node per loop, one *iterval* node per loop carrying the loop
context vector. Edges: control (root -> every for), metadata (for -> its iterval) and
nesting (outer for -> inner for); ``edge_type`` tells them apart (0, 1, 2).

Two modes:

- ``plain``: the nodes the kernel has.
- ``super``: the super-graph template. A fixed set of node slots, one per
  (stage, axis role, tile level) over :data:`~metatune.loopnest.STAGES` x
  :data:`~metatune.loopnest.ROLES` x ``LEVELS``, the union over all convolution types
  (and dense); a slot is filled by the loop at that place and left null (zero features,
  ``present = 0``) elsewhere, so that slot *k* means the same thing in every workload.
  Template edges (root -> for slot, for slot -> iterval slot) exist for every slot;
  nesting edges connect the filled slots. Two loops landing in one slot (e.g. several
  producer stages of winograd) are merged: the outer one is kept, ``merged`` counts.

Node feature layout (``NODE_FEATURES``): type one-hot (root, for, iterval), present,
merged, stage one-hot, role one-hot, level one-hot, then the loop context vector
(iterval nodes; for nodes carry only log extent and loop kind; the root carries global
counts in the first context entries).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from metatune.config import DEFAULT_GRAPH, GRAPH_MODES
from metatune.loopnest import LEVELS, LOOP_FEATURES, ROLES, STAGES, LoopNest, read_loop_nest

MODES = GRAPH_MODES
#: The version of the node features and graph construction. A checkpoint records the one it
#: was trained with; bump it whenever a change here or in :mod:`metatune.loopnest` gives a
#: schedule a different graph, so that older checkpoints are refused instead of misread.
FEATURE_VERSION = 1
_HEAD = 3 + 2 + len(STAGES) + len(ROLES) + LEVELS
NODE_FEATURES = _HEAD + len(LOOP_FEATURES)
SLOTS = [(s, r, lv) for s in STAGES for r in ROLES for lv in range(LEVELS)]
SLOT_INDEX = {key: i for i, key in enumerate(SLOTS)}
CONTROL, METADATA, NESTING = 0, 1, 2


#: Column of the loop context vector in a node's features; of ``present`` and ``merged``.
_CTX, _PRESENT, _MERGED = _HEAD, 3, 4
#: For nodes carry the first entries of the context vector (log extent, loop kind).
_FOR_CONTEXT = 6


def _head(kind: int, present: float, merged: float, stage: str | None, role: str | None,
          level: int | None) -> list[float]:
    row = [0.0] * _HEAD
    row[kind] = 1.0
    row[_PRESENT], row[_MERGED] = present, merged
    if stage is not None:
        row[5 + STAGES.index(stage)] = 1.0
    if role is not None:
        row[5 + len(STAGES) + ROLES.index(role)] = 1.0
    if level is not None:
        row[5 + len(STAGES) + len(ROLES) + level] = 1.0
    return row


def _template() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The empty super graph: node features (every slot null), template edges and types."""
    k = len(SLOTS)
    rows = [[0.0] * NODE_FEATURES]
    rows += [_head(1, 0.0, 0.0, s, r, lv) + [0.0] * len(LOOP_FEATURES) for s, r, lv in SLOTS]
    rows += [_head(2, 0.0, 0.0, s, r, lv) + [0.0] * len(LOOP_FEATURES) for s, r, lv in SLOTS]
    edges = np.array([[0] * k + list(range(1, k + 1)),
                      list(range(1, k + 1)) + list(range(k + 1, 2 * k + 1))], dtype=np.int64)
    return (np.array(rows, dtype=np.float32), edges,
            np.array([CONTROL] * k + [METADATA] * k, dtype=np.int64))


_SUPER_X, _SUPER_EDGES, _SUPER_TYPES = _template()


def _root(nest: LoopNest) -> list[float]:
    ctx = [0.0] * len(LOOP_FEATURES)
    ctx[0] = math.log2(1 + len(nest.loops))
    ctx[1] = math.log2(1 + len(nest.blocks))
    return _head(0, 1.0, 0.0, None, None, None) + ctx


def _data(x: np.ndarray, edge_index: np.ndarray, edge_type: np.ndarray):
    from torch_geometric.data import Data

    return Data(x=torch.from_numpy(x), edge_index=torch.from_numpy(edge_index),
                edge_type=torch.from_numpy(edge_type))


def plain_graph(nest: LoopNest):
    """The kernel's own graph: ``1 + 2 * n_loops`` nodes."""
    n = len(nest.loops)
    x = np.zeros((1 + 2 * n, NODE_FEATURES), dtype=np.float32)
    x[0] = _root(nest)
    for i, loop in enumerate(nest.loops):
        head = _head(1, 1.0, 0.0, loop.stage, loop.role, loop.level)
        x[1 + i, :_HEAD] = head
        x[1 + i, _CTX:_CTX + _FOR_CONTEXT] = loop.features[:_FOR_CONTEXT]
        head[1], head[2] = 0.0, 1.0  # the iterval node: same place, whole context
        x[1 + n + i, :_HEAD] = head
        x[1 + n + i, _CTX:] = loop.features
    src, dst, typ = [], [], []
    for i, loop in enumerate(nest.loops):
        src += [0, 1 + i]
        dst += [1 + i, 1 + n + i]
        typ += [CONTROL, METADATA]
        if loop.parent >= 0:
            src.append(1 + loop.parent)
            dst.append(1 + i)
            typ.append(NESTING)
    return _data(x, np.array([src, dst], dtype=np.int64).reshape(2, -1),
                 np.array(typ, dtype=np.int64))


def super_graph(nest: LoopNest):
    """The super-graph template filled with this kernel: ``1 + 2 * len(SLOTS)`` nodes."""
    k = len(SLOTS)
    x = _SUPER_X.copy()
    x[0] = _root(nest)
    slot_of: list[int | None] = []
    for loop in nest.loops:
        slot = SLOT_INDEX.get((loop.stage, loop.role, loop.level))
        slot_of.append(slot)
        if slot is None:
            continue
        fo, val = 1 + slot, 1 + k + slot
        if x[fo, _PRESENT] == 1.0:  # taken by an outer loop: count the merge
            x[fo, _MERGED] += 1.0
            x[val, _MERGED] += 1.0
            continue
        x[fo, _PRESENT] = x[val, _PRESENT] = 1.0
        x[fo, _CTX:_CTX + _FOR_CONTEXT] = loop.features[:_FOR_CONTEXT]
        x[val, _CTX:] = loop.features
    src, dst = [], []
    seen = set()
    for i, loop in enumerate(nest.loops):
        a, b = (slot_of[loop.parent] if loop.parent >= 0 else None), slot_of[i]
        if a is not None and b is not None and a != b and (a, b) not in seen:
            seen.add((a, b))
            src.append(1 + a)
            dst.append(1 + b)
    nesting = np.array([src, dst], dtype=np.int64).reshape(2, -1)
    return _data(x, np.concatenate([_SUPER_EDGES, nesting], axis=1),
                 np.concatenate([_SUPER_TYPES, np.full(len(src), NESTING, dtype=np.int64)]))


def encode(func, mode: str = DEFAULT_GRAPH):
    """Encode a scheduled ``PrimFunc`` as a PyG ``Data`` graph.

    Args:
        func: The scheduled ``tvm.tirx.PrimFunc`` (e.g. ``candidate.sch.mod["main"]``).
        mode: ``"super"`` (super-graph template) or ``"plain"``.

    Returns:
        ``Data`` with ``x`` (a ``num_nodes x NODE_FEATURES`` float tensor),
        ``edge_index`` (``2 x num_edges``) and ``edge_type`` (``num_edges``).

    Raises:
        ValueError: Unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown graph mode {mode!r}: choose one of {', '.join(MODES)}")
    nest = read_loop_nest(func)
    return super_graph(nest) if mode == "super" else plain_graph(nest)
