"""Knob vectors: a candidate's schedule decisions as a fixed-length numeric vector.

A MetaSchedule candidate is a design-space trace with its sampling decisions filled in.
Candidates of one design space share the instruction sequence and differ only in the
decisions, so the decisions, read in trace order, are the candidate's coordinates:

- ``SamplePerfectTile``: each factor as ``log2(factor) / log2(extent)`` (the share of the
  loop's extent it takes; they sum to 1);
- ``SampleCategorical``: the chosen index over the number of choices (unroll depth, ...);
- ``SampleComputeLocation``: the chosen loop (``-2`` inline, ``-1`` root, then loops)
  scaled by 1/16.

:class:`KnobSpace` gives every design space (keyed by its decision signature) a one-hot
slot and pads vectors to a common width, so candidates of several design spaces share
one vector space.
"""

from __future__ import annotations

import math

import numpy as np


def _decisions(trace) -> list[tuple[str, object, object]]:
    """``(kind name, instruction attrs, decision)`` of every sampling instruction."""
    out = []
    for inst in trace.insts:
        if inst in trace.decisions:
            out.append((inst.kind.name, inst.attrs, trace.decisions[inst]))
    return out


def signature(trace) -> tuple:
    """The design-space key of a trace: its decision kinds and tile arities."""
    sig = []
    for kind, _, decision in _decisions(trace):
        arity = len(decision) if kind == "SamplePerfectTile" else 1
        sig.append((kind, arity))
    return tuple(sig)


def knob_values(trace) -> list[float]:
    """The decisions of a trace as numbers in about ``[0, 1]`` (see the module docstring)."""
    values: list[float] = []
    for kind, attrs, decision in _decisions(trace):
        if kind == "SamplePerfectTile":
            factors = [int(f) for f in decision]
            total = math.log2(max(2, math.prod(factors)))
            values += [math.log2(max(1, f)) / total for f in factors]
        elif kind == "SampleCategorical":
            n = len(attrs[0]) if attrs else 1
            values.append(int(decision) / max(1, n - 1))
        elif kind == "SampleComputeLocation":
            values.append((int(decision) + 2) / 16.0)
        else:  # other sampling instructions: their decision if it is a number
            try:
                values.append(float(decision))
            except (TypeError, ValueError):
                values.append(0.0)
    return values


class KnobSpace:
    """Maps candidates of one task to fixed-width knob vectors.

    Args:
        max_spaces: Design spaces given a one-hot slot (more share the last slot).
        width: Knob slots (longer decision lists are truncated, shorter zero-padded).
    """

    def __init__(self, max_spaces: int = 8, width: int = 64) -> None:
        self.max_spaces = int(max_spaces)
        self.width = int(width)
        self.spaces: dict[tuple, int] = {}

    @property
    def dim(self) -> int:
        """Length of a knob vector."""
        return self.width + self.max_spaces

    def vector(self, trace) -> np.ndarray:
        """The knob vector of one trace: a ``dim`` float array."""
        sig = signature(trace)
        slot = self.spaces.setdefault(sig, min(len(self.spaces), self.max_spaces - 1))
        out = np.zeros(self.dim)
        vals = knob_values(trace)[: self.width]
        out[: len(vals)] = vals
        out[self.width + slot] = 1.0
        return out

    def matrix(self, candidates) -> np.ndarray:
        """Knob vectors of MetaSchedule candidates: an ``n x dim`` array."""
        if not candidates:
            return np.zeros((0, self.dim))
        return np.stack([self.vector(c.sch.trace) for c in candidates])
