"""Schedule transfer: a new task's first round starts from the best schedules of the most
similar workloads measured before (after transfer-tuning, Gibson and Cano, PACT'22).

Three steps, each in its own module:

1. **Sources** (:mod:`tuner.search.transfer_sources`): the shipped datasets
   (:func:`dataset_sources`: the target's own platform's splits, else every platform's, in
   the run's layout) and any MetaSchedule database (:class:`DatabaseSource`: the tuning
   memory, a work dir's), each read once, indexed by kind, keeping each workload's best few
   records.
2. **Similarity** (:mod:`tuner.search.transfer_similarity`): the workloads of the task's
   kind (the same blocks, by name and iteration kinds), nearest first by the mean ``log2``
   distance of their iteration extents; the exact same workload first of all.
3. **Replay** (:mod:`tuner.search.transfer_replay`): each kept record's trace applied to the
   task, tilings that no longer divide re-decided as the nearest perfect tiling, then the
   task's postprocessors; what fails is dropped, and so is a result whose own trace (what
   the database stores) does not re-apply to the task as a stored record is rebuilt.

The API, for the session (``memory.transfer=true``):

- :func:`transfer_candidates` ``(task_mod, target, sources, k)``: at most ``k`` distinct
  ``MeasureCandidate`` s for the task, nearest workload first and within one the best
  record first (at most ``per_workload`` from each workload).
- :func:`with_transfer` ``(search, sources=..., share=0.5)``: the search (``bo``,
  ``evolutionary``, ``rl``, plain or inside :class:`tuner.engine.norepeat.NoRepeatSearch`)
  with each task's first round starting from its transferred candidates, up to ``share``
  of the round; every later round, and the rest of the first, are the search's own
  (:class:`tuner.search.transfer_search.TransferSearch`).
- :class:`TransferTally`: what transfer gave over a run's tasks (shared by every task's
  search), for the report.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from tuner.engine.database import as_candidate
from tuner.engine.norepeat import NoRepeatSearch
from tuner.search.transfer_replay import ReplayStats, replay_onto
from tuner.search.transfer_search import TransferSearch, TransferTally
from tuner.search.transfer_similarity import distance, signature
from tuner.search.transfer_sources import (
    DatabaseSource,
    DatasetSource,
    SourceWorkload,
    dataset_sources,
)

logger = logging.getLogger(__name__)

__all__ = ["DatabaseSource", "DatasetSource", "TransferTally", "dataset_sources",
           "nearest_workloads", "task_postprocs", "transfer_candidates", "with_transfer"]


@dataclass
class Transferred:
    """What :func:`transfer_candidates` did for one task.

    Attributes:
        candidates: The ``MeasureCandidate`` s, best source first.
        origins: For each candidate, ``(source workload label, distance, record rank)``.
        nearest: The workloads considered, ``(label, distance)``, nearest first.
        replay: The replay counts.
    """

    candidates: list = field(default_factory=list)
    origins: list[tuple[str, float, int]] = field(default_factory=list)
    nearest: list[tuple[str, float]] = field(default_factory=list)
    replay: ReplayStats = field(default_factory=ReplayStats)


def nearest_workloads(task_mod, sources: list, n: int = 4,
                      max_distance: float = math.inf) -> list[tuple[float, SourceWorkload]]:
    """The ``n`` workloads of the sources nearest to the task, of its kind.

    Ties (the same distance) go to the exact same workload (equal structural hash), then to
    the earlier source.

    Args:
        task_mod: The task's ``IRModule``.
        sources: Sources (:class:`DatasetSource`, :class:`DatabaseSource`), in preference
            order.
        n: How many.
        max_distance: Farther workloads are left out.

    Returns:
        ``(distance, workload)`` pairs, nearest first.
    """
    from tvm_ffi import structural_hash

    sig = signature(task_mod)
    shash = str(structural_hash(task_mod))
    scored = []
    for rank, source in enumerate(sources):
        for w in source.workloads(sig.kind):
            d = distance(sig, w.signature)
            if d <= max_distance:
                scored.append((d, w.shash != shash, rank, len(scored), w))
    scored.sort(key=lambda t: t[:4])
    return [(d, w) for d, _, _, _, w in scored[:n]]


def task_postprocs(task_mod, target) -> list:
    """The postprocessors MetaSchedule's default design space gives the task on the target
    (what its searches run on every candidate)."""
    from tvm.s_tir import meta_schedule as ms

    from tuner.engine.intrinsics import load_tensor_intrinsics

    load_tensor_intrinsics((str(target.kind.name),))
    ctx = ms.TuneContext(mod=task_mod, target=target, space_generator="post-order-apply",
                         num_threads=1)
    return list(ctx.space_generator.postprocs or [])


def transfer_candidates(task_mod, target, sources: list, k: int = 8, *, postprocs=None,
                        workloads: int = 4, per_workload: int = 4,
                        max_distance: float = math.inf, refit: bool = True,
                        out: Transferred | None = None) -> list:
    """Candidates for a task replayed from the best schedules of its nearest workloads.

    Args:
        task_mod: The task's ``IRModule``.
        target: The ``tvm.target.Target`` (its postprocessors, when ``postprocs`` is not
            given).
        sources: Where to look, in preference order (see :func:`nearest_workloads`).
        k: At most this many candidates.
        postprocs: The task's postprocessors, initialized (default:
            :func:`task_postprocs`).
        workloads: Nearest workloads looked at.
        per_workload: At most this many candidates from one workload.
        max_distance: Workloads farther than this are not used.
        refit: Re-decide the tilings that no longer divide as the nearest perfect tiling
            (``False``: TVM's own fallback; see :mod:`tuner.search.transfer_replay`).
        out: Filled with what was done (:class:`Transferred`).

    Returns:
        At most ``k`` distinct ``MeasureCandidate`` s, nearest workload first, within one
        the best measured first.
    """
    from tvm_ffi import structural_hash

    out = out if out is not None else Transferred()
    if k <= 0:
        return []
    near = nearest_workloads(task_mod, sources, workloads, max_distance)
    out.nearest = [(w.label, d) for d, w in near]
    if not near:
        return []
    if postprocs is None:
        postprocs = task_postprocs(task_mod, target)
    seen: set[int] = set()
    for d, w in near:
        taken = 0
        for rank in range(len(w.seconds)):
            if taken >= per_workload or len(out.candidates) >= k:
                break
            trace = w.traces(rank)
            if trace is None:
                continue
            # verify: the trace the database will store must rebuild the schedule the
            # way the evolutionary search seeds its population (issue 61)
            sch = replay_onto(trace, task_mod, postprocs, out.replay, refit, verify=True)
            if sch is None:
                continue
            h = structural_hash(sch.mod)
            if h in seen:
                continue
            seen.add(h)
            out.candidates.append(as_candidate(sch))
            out.origins.append((w.label, d, rank))
            taken += 1
        if len(out.candidates) >= k:
            break
    return out.candidates


class SourceProvider:
    """Each task's candidates from ``sources`` (:func:`transfer_candidates` with the task's
    own context: its module, target and postprocessors), for :class:`TransferSearch`."""

    def __init__(self, sources: list, options: dict | None = None) -> None:
        self.sources = list(sources)
        self.options = dict(options or {})

    def __call__(self, context, k: int) -> tuple[list, ReplayStats]:
        out = Transferred()
        transfer_candidates(context.mod, context.target, self.sources, k,
                            postprocs=list(context.space_generator.postprocs or []), out=out,
                            **self.options)
        if out.candidates:
            logger.info("%s: %d transferred candidates, from %s", context.task_name,
                        len(out.candidates), ", ".join(
                            f"{label} (distance {d:.2f})" for label, d in out.nearest[:2]))
        return out.candidates, out.replay


class FixedProvider:
    """The same candidates for the one task a search serves."""

    def __init__(self, candidates: list) -> None:
        self.candidates = list(candidates)

    def __call__(self, context, k: int) -> tuple[list, ReplayStats]:
        return self.candidates[:k], ReplayStats()


def with_transfer(search, *, sources: list | None = None, candidates: list | None = None,
                  share: float = 0.5, k: int | None = None, tally: TransferTally | None = None,
                  **options):
    """``search`` with each task's first round starting from transferred candidates.

    Args:
        search: A search strategy (``BatchBOSearch``, MetaSchedule's ``EvolutionarySearch``,
            ``RLSearch``, ...), or a :class:`tuner.engine.norepeat.NoRepeatSearch` around one
            (the transfer goes inside it, so a transferred schedule measured before is not
            measured again, and the round's budget cut falls on the search's own).
        sources: Where each task's candidates come from (:func:`transfer_candidates`, with
            the task's own postprocessors); or
        candidates: Fixed candidates (``MeasureCandidate`` s of one task: only for a search
            that serves one task).
        share: At most this share of the first round's candidates are transferred (at
            least one when there are any).
        k: Candidates to look for per task (default: ``share`` of the round).
        tally: Counts over the tasks, filled as they run (pass one to read them).
        options: More keyword arguments of :func:`transfer_candidates` (``workloads``,
            ``per_workload``, ``max_distance``, ``refit``).

    Returns:
        The wrapped search (a ``NoRepeatSearch`` again if ``search`` was one).
    """
    if (sources is None) == (candidates is None):
        raise TypeError("with_transfer: give either sources or candidates")
    provider = (FixedProvider(candidates) if candidates is not None
                else SourceProvider(sources, options))
    tally = tally if tally is not None else TransferTally()
    if isinstance(search, NoRepeatSearch):
        return NoRepeatSearch(TransferSearch(search.inner, provider, share, k, tally),
                              search.max_regenerate, search.clock, search.budget)
    return TransferSearch(search, provider, share, k, tally)
