"""One-step moves of a schedule's sampling decisions: the coordinates local refinement
(:mod:`tuner.search.refine`) descends along.

A MetaSchedule trace carries a decision on each of its sampling instructions. A move
changes exactly one of them:

- ``SamplePerfectTile`` (factors ``f``, outer first, multiplying to the loop's extent):
  one prime factor moved from one tile level to another, or two levels' factors swapped;
  every move is again a perfect tiling of the same extent, and the innermost factor stays
  within the instruction's ``max_innermost_factor``;
- ``SampleCategorical``: every other choice of non-zero probability (unroll depth, ...);
- ``SampleComputeLocation`` (``-2`` inline, ``-1`` root, then loops): the location below
  (TVM takes the nearest valid one below what is asked) and the one or two above (TVM
  brings one that is not valid back down; the replay says which decision was taken).

Other sampling instructions are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

TILE, CATEGORICAL, LOCATION = "SamplePerfectTile", "SampleCategorical", "SampleComputeLocation"


@dataclass(frozen=True)
class Move:
    """One decision changed.

    Attributes:
        index: Which sampling instruction (its position among the trace's sampling
            instructions, in trace order).
        kind: Its kind name (``SamplePerfectTile``, ...).
        decision: The new decision (a tuple of factors for a tiling, else an int).
    """

    index: int
    kind: str
    decision: tuple[int, ...] | int


def _plain(kind: str, decision) -> tuple[int, ...] | int | None:
    """A decision as plain Python (``None`` for one that is neither a tiling nor a number)."""
    if kind == TILE:
        return tuple(int(f) for f in decision)
    try:
        return int(decision)
    except (TypeError, ValueError):
        return None


def sampling(trace) -> list[tuple[object, str, object, tuple[int, ...] | int | None]]:
    """``(instruction, kind name, attrs, decision)`` of each sampling instruction of
    ``trace``, in trace order, decisions as plain Python."""
    out = []
    for inst in trace.insts:
        if inst in trace.decisions:
            kind = inst.kind.name
            out.append((inst, kind, inst.attrs, _plain(kind, trace.decisions[inst])))
    return out


def decisions(trace) -> list[tuple[int, ...] | int | None]:
    """The decisions of ``trace``'s sampling instructions, in order, as plain Python."""
    return [d for _, _, _, d in sampling(trace)]


def prime_factors(n: int) -> list[int]:
    """The distinct prime factors of ``n >= 1``, ascending."""
    out, p = [], 2
    while p * p <= n:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def tile_moves(factors: tuple[int, ...], max_innermost: int = 0) -> list[tuple[int, ...]]:
    """The tilings one move from ``factors`` (see the module docstring), in a fixed order.

    Args:
        factors: The tiling, outer first.
        max_innermost: The largest innermost factor allowed (0 or less: no limit).

    Returns:
        Distinct tilings of the same extent, each differing from ``factors``.
    """
    factors = tuple(int(f) for f in factors)
    out: list[tuple[int, ...]] = []
    seen = {factors}

    def add(new: list[int]) -> None:
        t = tuple(new)
        if t in seen or (max_innermost > 0 and t[-1] > max_innermost):
            return
        seen.add(t)
        out.append(t)

    n = len(factors)
    for i in range(n):
        for p in prime_factors(factors[i]):
            for j in range(n):
                if j != i:
                    new = list(factors)
                    new[i] //= p
                    new[j] *= p
                    add(new)
    for i in range(n):
        for j in range(i + 1, n):
            new = list(factors)
            new[i], new[j] = new[j], new[i]
            add(new)
    return out


def categorical_moves(choice: int, probs) -> list[int]:
    """Every other choice whose probability is not zero."""
    return [k for k, p in enumerate(probs) if k != choice and float(p) > 0.0]


def location_moves(location: int) -> list[int]:
    """The compute locations asked for around ``location``: below, and the two above."""
    return [d for d in (location - 1, location + 1, location + 2) if d >= -2]


def moves(trace) -> list[Move]:
    """Every one-step move of ``trace``'s decisions (see the module docstring), decision
    by decision in trace order."""
    out: list[Move] = []
    for index, (_, kind, attrs, decision) in enumerate(sampling(trace)):
        if decision is None:
            continue
        if kind == TILE:
            limit = int(attrs[1]) if len(attrs) > 1 else 0
            out += [Move(index, kind, t) for t in tile_moves(decision, limit)]
        elif kind == CATEGORICAL and len(attrs) > 1:
            out += [Move(index, kind, k) for k in categorical_moves(decision, attrs[1])]
        elif kind == LOCATION:
            out += [Move(index, kind, d) for d in location_moves(decision)]
    return out
