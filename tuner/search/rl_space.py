"""A task's sampling decisions as ordered choices: the space the RL search walks.

A MetaSchedule candidate is a design-space trace with its sampling decisions filled in
(see :mod:`tuner.search.knobs`). Here every decision gets an ordered list of its choices,
so that a candidate is a point ``(design space, choice index per decision)`` and a move
is one index down or up:

- ``SamplePerfectTile``: every perfect tiling of the loop's extent (the product of the
  sampled factors) into ``n`` factors, the innermost at most ``max_innermost_factor``,
  in lexicographic order (the order of AutoTVM's split knobs, which Chameleon walked);
- ``SampleCategorical``: its candidates in their order (unroll depths, ...);
- ``SampleComputeLocation``: the locations the block may go to (``-2`` inline, ``-1``
  root, then loops), found once per design space by asking TVM.

A point is built into a candidate by replaying its design space's trace with the point's
decisions and running the task's postprocessors; a point whose replay or postprocessing
fails is invalid.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

#: ``(design space index, choice index per decision)``.
Point = tuple[int, tuple[int, ...]]

_DECISION = re.compile(r",? ?decision=(\[[^\]]*\]|-?\d+)")
_TILE, _CATEGORICAL, _LOCATION = "SamplePerfectTile", "SampleCategorical", "SampleComputeLocation"


def tilings(extent: int, n: int, max_innermost: int = 0) -> list[tuple[int, ...]]:
    """Every ordered ``n``-factor perfect tiling of ``extent``, in lexicographic order.

    Args:
        extent: The loop's extent.
        n: Factors per tiling.
        max_innermost: Largest innermost factor (``<= 0``: no limit).

    Returns:
        Tuples of ``n`` factors whose product is ``extent``.
    """
    small = [d for d in range(1, math.isqrt(extent) + 1) if extent % d == 0]
    divisors = sorted(set(small + [extent // d for d in small]))

    def split(rest: int, k: int) -> list[tuple[int, ...]]:
        if k == 1:
            return [(rest,)] if max_innermost <= 0 or rest <= max_innermost else []
        return [(f, *tail) for f in divisors if rest % f == 0 for tail in split(rest // f, k - 1)]

    return split(extent, n)


def structure_key(trace) -> str:
    """A trace's instructions without decisions or postprocessing: equal for every
    candidate of one design space, different between design spaces."""
    lines = trace.simplified(remove_postproc=True).as_python()
    return "\n".join(_DECISION.sub("", line) for line in lines)


def _value_key(decision) -> object:
    """A decision as a hashable Python value: an int, or a tuple of ints (tiles)."""
    try:
        return int(decision)
    except TypeError:
        return tuple(int(f) for f in decision)


def _decisions(trace) -> list:
    """The sampling instructions of a trace, in trace order."""
    return [inst for inst in trace.insts if inst in trace.decisions]


@dataclass
class _Space:
    """One design space: its trace, sampling instructions and their ordered choices."""

    trace: object
    insts: list
    kinds: list[str]
    choices: list[list]
    index: list[dict]


class DecisionSpace:
    """The points of a task's design spaces: moves, the policy's state, candidates.

    Args:
        mod: The task's ``IRModule``.
        design_spaces: The design spaces' ``Schedule`` s (their traces, with a sample of
            decisions each).
        postprocs: The task's postprocessors.
    """

    def __init__(self, mod, design_spaces: list, postprocs: list) -> None:
        self.mod = mod
        self.postprocs = list(postprocs)
        self.spaces: list[_Space] = []
        self.keys: dict[str, int] = {}
        for sch in design_spaces:
            trace = sch.trace.simplified(remove_postproc=True)
            key = structure_key(trace)
            if key in self.keys:
                continue
            self.keys[key] = len(self.spaces)
            self.spaces.append(self._space(trace))
        # at least one slot: a task without decisions still has a (stay-only) policy head
        self.width = max([1] + [len(s.insts) for s in self.spaces])
        self.sizes = np.ones((len(self.spaces), self.width), dtype=np.int64)
        for i, s in enumerate(self.spaces):
            self.sizes[i, : len(s.choices)] = [len(c) for c in s.choices]

    @property
    def dim(self) -> int:
        """Length of a state vector: the normalized choice indices and a design-space
        one-hot."""
        return self.width + len(self.spaces)

    def _space(self, trace) -> _Space:
        insts = _decisions(trace)
        kinds = [inst.kind.name for inst in insts]
        choices: list[list] = []
        for inst, kind in zip(insts, kinds, strict=False):
            decision = trace.decisions[inst]
            if kind == _TILE:
                factors = [int(f) for f in decision]
                limit = int(inst.attrs[1]) if len(inst.attrs) > 1 else 0
                choices.append(tilings(int(np.prod(factors)), len(factors), limit)
                               or [tuple(factors)])
            elif kind == _CATEGORICAL:
                choices.append(list(range(len(inst.attrs[0]))))
            else:  # compute locations (below); other sampling instructions stay as sampled
                choices.append([_value_key(decision)])
        for j, kind in enumerate(kinds):
            if kind == _LOCATION:
                choices[j] = self._locations(trace, insts, kinds, choices, j)
        index = [{c: i for i, c in enumerate(cs)} for cs in choices]
        return _Space(trace, insts, kinds, choices, index)

    def _locations(self, trace, insts: list, kinds: list[str], choices: list[list],
                   j: int, probes: int = 8) -> list[int]:
        """The compute locations decision ``j`` may take: ``-2`` (inline) if the block may
        be inlined, ``-1`` (root), then the loop positions up to the highest one TVM gives
        when asked for one far above, on the design space's own tiles and on ``probes``
        random ones. (TVM skips unit loops, so which positions exist depends on the
        tiles; it moves a position that does not exist to the nearest one below, and
        :meth:`build` reads back where it went.)"""
        rng = np.random.default_rng(j)
        top = -1
        for probe in range(probes + 1):
            changes = {insts[j]: 1 << 20}
            if probe:
                changes.update({inst: list(cs[rng.integers(len(cs))])
                                for inst, kind, cs in zip(insts, kinds, choices, strict=False)
                                if kind == _TILE})
            sch = self._replay(trace, changes)
            if sch is not None:
                top = max(top, int(sch.trace.decisions[_decisions(sch.trace)[j]]))
        inline = self._replay(trace, {insts[j]: -2})
        can_inline = inline is not None and int(
            inline.trace.decisions[_decisions(inline.trace)[j]]) == -2
        return ([-2] if can_inline else []) + list(range(-1, top + 1))

    def _replay(self, trace, changes: dict):
        """The trace applied to the task with some decisions changed, before
        postprocessing; ``None`` if TVM refuses it."""
        from tvm.s_tir import Schedule
        from tvm.s_tir.schedule import Trace

        decisions = {inst: trace.decisions[inst] for inst in _decisions(trace)}
        decisions.update(changes)
        sch = Schedule(self.mod, debug_mask=0, error_render_level="none")
        try:
            Trace(trace.insts, decisions).apply_to_schedule(sch, remove_postproc=True)
        except Exception as err:  # noqa: BLE001 - TVM raises its own errors for bad decisions
            logger.debug("decisions do not replay: %s", err)
            return None
        return sch

    def point_of(self, trace) -> Point | None:
        """The point of a candidate's trace (``None``: not of these design spaces, or a
        decision outside its choices).

        A schedule replayed from the database was postprocessed without TVM's
        ``EnterPostproc`` mark, so its postprocessing stays in its trace: its design space
        is the one whose instructions begin it.
        """
        key = structure_key(trace)
        space = self.keys.get(key)
        if space is None:
            starts = [(len(k), i) for k, i in self.keys.items() if key.startswith(k + "\n")]
            space = max(starts)[1] if starts else None
        return None if space is None else self._read(space, trace)

    def _read(self, space: int, trace) -> Point | None:
        s = self.spaces[space]
        insts = _decisions(trace)
        if len(insts) != len(s.insts):
            return None
        out = []
        for index, inst in zip(s.index, insts, strict=False):
            i = index.get(_value_key(trace.decisions[inst]))
            if i is None:
                return None
            out.append(i)
        return space, tuple(out)

    def build(self, point: Point):
        """A point as a MetaSchedule candidate.

        Returns:
            ``(candidate, point)``: the ``MeasureCandidate`` and the point as TVM applied it
            (equal to ``point`` unless TVM moved a decision); ``None`` if the point does
            not replay or a postprocessor rejects it.
        """
        from tuner.engine.database import as_candidate

        s = self.spaces[point[0]]
        changes = {}
        for j, (inst, i) in enumerate(zip(s.insts, point[1], strict=False)):
            if s.kinds[j] == _TILE:
                changes[inst] = list(s.choices[j][i])
            elif s.kinds[j] in (_CATEGORICAL, _LOCATION):
                changes[inst] = s.choices[j][i]
        sch = self._replay(s.trace, changes)
        if sch is None:
            return None
        applied = self._read(point[0], sch.trace) or point  # off the choices: as asked
        sch.enter_postproc()
        try:
            if not all(p.apply(sch) for p in self.postprocs):
                return None
        except Exception as err:  # noqa: BLE001 - a postprocessor may raise instead
            logger.debug("postprocessing failed: %s", err)
            return None
        return as_candidate(sch), applied

    def random_points(self, n: int, rng: np.random.Generator) -> list[Point]:
        """``n`` points drawn uniformly: a design space, then each decision's choice."""
        out = []
        for space in rng.integers(0, len(self.spaces), size=n):
            sizes = self.sizes[space, : len(self.spaces[space].insts)]
            out.append((int(space), tuple(int(i) for i in rng.integers(0, sizes))))
        return out

    def state(self, points: list[Point]) -> np.ndarray:
        """The policy's input: an ``n x dim`` array of each decision's choice index over
        its last index (0 for a decision with one choice, and for padding), then the design
        space as a one-hot."""
        x = np.zeros((len(points), self.dim), dtype=np.float32)
        for row, (space, idx) in enumerate(points):
            sizes = self.sizes[space, : len(idx)]
            x[row, : len(idx)] = np.asarray(idx) / np.maximum(sizes - 1, 1)
            x[row, self.width + space] = 1.0
        return x

    def moves(self, points: list[Point]) -> np.ndarray:
        """Which moves each decision may make: an ``n x width x 3`` boolean array of
        (down, stay, up); stay always, down above the first choice, up below the last."""
        mask = np.zeros((len(points), self.width, 3), dtype=bool)
        mask[:, :, 1] = True
        for row, (space, idx) in enumerate(points):
            i = np.asarray(idx)
            mask[row, : len(idx), 0] = i > 0
            mask[row, : len(idx), 2] = i < self.sizes[space, : len(idx)] - 1
        return mask

    def move(self, points: list[Point], actions: np.ndarray) -> list[Point]:
        """Each point moved by its actions (an ``n x width`` array of 0 down, 1 stay,
        2 up), clipped to the choices."""
        out = []
        for (space, idx), act in zip(points, actions, strict=False):
            i = np.asarray(idx) + np.asarray(act[: len(idx)]) - 1
            i = np.clip(i, 0, self.sizes[space, : len(idx)] - 1)
            out.append((space, tuple(int(v) for v in i)))
        return out
