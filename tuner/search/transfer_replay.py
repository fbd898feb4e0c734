"""Replay a schedule measured on one workload onto another of the same kind.

A MetaSchedule trace is a list of schedule instructions whose random ones
(``SamplePerfectTile``, ``SampleCategorical``, ``SampleComputeLocation``) carry the
decision taken. Applied to another workload of the same kind, the instructions find the
same blocks by name and the same loops by position; only decisions can stop fitting:

- a tiling ``SamplePerfectTile`` decided for other extents (its factors no longer multiply
  to the loop's extent). TVM itself would keep the factors that still divide, innermost
  first, and put the whole rest in one level (``(1, 1, 28, 1)`` for ``(1, 7, 8, 1)`` decided
  on 56 and replayed on 28). Here each factor is re-decided as the **divisor of what is
  left nearest to the old factor** (in ``log2``), innermost first, within the tile's
  ``max_innermost_factor``: ``(1, 4, 7, 1)``, the same shape of blocking;
- a ``SampleComputeLocation`` whose loop is gone: TVM takes the nearest loop outside it.

Categorical decisions (unroll depth, ...) are kept. The trace is then applied without its
postprocessing instructions, and the task's own postprocessors run on the result after an
``EnterPostproc`` mark, as MetaSchedule's searches build every candidate; a trace that fails
on the way is dropped. The mark matters: the candidate's trace is what the database stores,
and MetaSchedule's evolutionary search rebuilds its population from the best records by
applying them without their postprocessing (what follows the mark) and postprocessing
again. Unmarked, a ``RewriteLayout`` ``TransformLayout`` stayed in the replayed part and
the second layout rewrite failed TVM's check (``args.size() ==
initial_indices_orig.size()``), which made the whole sampler fail for the task in every
later round (issue 61). :func:`reapplies` checks a candidate the way the search rebuilds it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

logger = logging.getLogger(__name__)


def divisors(n: int) -> list[int]:
    """The divisors of ``n >= 1``, ascending."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i != n // i:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def refit_tiles(factors: list[int], extent: int, max_innermost: int = 0) -> list[int]:
    """A perfect tiling of ``extent`` close to ``factors`` (see the module docstring).

    Args:
        factors: The old decision, outer first.
        extent: The loop's extent now.
        max_innermost: The largest innermost factor allowed (0 or less: no limit).

    Returns:
        ``factors`` when they still multiply to ``extent``; else, innermost first, each
        factor the divisor of the extent left nearest to the old one in ``log2`` (the
        smaller on a tie), the outermost taking what remains.
    """
    if math.prod(factors) == extent and all(f >= 1 for f in factors):
        return list(factors)
    left = max(1, int(extent))
    out = [1] * len(factors)
    for i in range(len(factors) - 1, 0, -1):
        options = divisors(left)
        if i == len(factors) - 1 and max_innermost > 0:
            options = [d for d in options if d <= max_innermost] or [1]
        old = math.log2(max(1, int(factors[i])))
        out[i] = min(options, key=lambda d, old=old: (abs(math.log2(d) - old), d))
        left //= out[i]
    out[0] = left
    return out


@dataclass
class ReplayStats:
    """What replaying traces onto a task did.

    Attributes:
        tried: Traces replayed.
        applied: Traces that applied and passed every postprocessor.
        refitted: Applied traces with at least one tiling re-decided for the new extents.
        failed: Traces an instruction failed on.
        rejected: Traces a postprocessor refused.
    """

    tried: int = 0
    applied: int = 0
    refitted: int = 0
    failed: int = 0
    rejected: int = 0

    def add(self, other: ReplayStats) -> None:
        """Add another's counts to these."""
        for name in ("tried", "applied", "refitted", "failed", "rejected"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def reapplies(sch, mod, postprocs: list) -> bool:
    """Whether ``sch``'s trace rebuilds a schedule of ``mod`` the way MetaSchedule's searches
    rebuild a stored record: applied to a fresh schedule without its postprocessing
    instructions, then ``EnterPostproc`` and the postprocessors.

    Args:
        sch: A postprocessed ``tvm.s_tir.Schedule`` of ``mod`` (a candidate).
        mod: The task's ``IRModule``.
        postprocs: The task's postprocessors, initialized.

    Returns:
        ``True`` when every instruction applies and every postprocessor accepts.
    """
    from tvm.s_tir import Schedule

    fresh = Schedule(mod)
    try:
        sch.trace.apply_to_schedule(fresh, remove_postproc=True)
        fresh.enter_postproc()
        return all(p.apply(fresh) for p in postprocs)
    except Exception as err:  # noqa: BLE001 - TVM raises many kinds on a trace that does not fit
        logger.debug("a replayed trace does not re-apply: %s",
                     str(err).strip().splitlines()[-1:])
        return False


def replay_onto(trace, mod, postprocs: list, stats: ReplayStats | None = None,
                refit: bool = True, verify: bool = False):
    """Apply ``trace`` (measured on another workload of the same kind) to ``mod``.

    Args:
        trace: The measured schedule's ``tvm.s_tir.Trace``.
        mod: The task's ``IRModule``.
        postprocs: The task's postprocessors (its space generator's), already initialized
            with a tune context.
        stats: Counts to add this replay to.
        refit: Re-decide tilings that no longer fit as the nearest perfect tiling
            (:func:`refit_tiles`); ``False``: leave them to TVM's own fallback.
        verify: Also check that the result's trace re-applies to a fresh schedule of
            ``mod`` as a stored record is rebuilt (:func:`reapplies`); one that does not
            counts as rejected.

    Returns:
        The postprocessed ``tvm.s_tir.Schedule``, or ``None`` when an instruction failed,
        a postprocessor refused the result, or (``verify``) its trace does not re-apply.
    """
    from tvm.s_tir import Schedule

    stats = stats if stats is not None else ReplayStats()
    stats.tried += 1
    sch = Schedule(mod)
    refitted = [False]

    def decide(inst, inputs, attrs, decision):
        if not refit or inst.kind.name != "SamplePerfectTile" or decision is None:
            return decision
        extent = getattr(sch.get(inputs[0]), "extent", None)
        if not hasattr(extent, "value"):
            return decision  # a symbolic extent: TVM's own handling
        old = [int(f) for f in decision]
        new = refit_tiles(old, int(extent.value), int(attrs[1]) if len(attrs) > 1 else 0)
        if new != old:
            refitted[0] = True
        return new

    try:
        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=decide)
    except Exception as err:  # noqa: BLE001 - TVM raises many kinds on a trace that does not fit
        stats.failed += 1
        logger.debug("transferred trace does not apply: %s", str(err).strip().splitlines()[-1:])
        return None
    sch.enter_postproc()  # as MetaSchedule marks it: a stored trace re-applies without it
    try:
        ok = all(p.apply(sch) for p in postprocs)
    except Exception as err:  # noqa: BLE001 - a postprocessor may raise instead of refusing
        logger.debug("postprocessor failed on a transferred trace: %s", err)
        ok = False
    if not ok or (verify and not reapplies(sch, mod, postprocs)):
        stats.rejected += 1
        return None
    stats.applied += 1
    stats.refitted += refitted[0]
    return sch
