"""The neighbours of a task's best measured schedules, replayed on the task and screened by
the cost model: the per-task state of local refinement (:mod:`tuner.search.refine`).

A neighbour is the best schedule's trace with one decision moved
(:mod:`tuner.search.refine_moves`), applied to the task's module without its
postprocessing instructions, then the task's postprocessors, as MetaSchedule's searches
build every candidate (:func:`tuner.search.transfer_replay.replay_onto`). A replay that
fails, that a postprocessor refuses, or whose decisions do not differ from the base's in
exactly the moved one (TVM brought a compute location back) is dropped.

What each move gave is remembered per base (its structural hash, or that it is no
neighbour), so a round replays only moves whose schedule may still be measured; the
schedules themselves are not kept between rounds (memory stays a few integers a move).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.search.refine_moves import Move, decisions, moves, sampling
from tuner.search.refine_params import RefineConfig
from tuner.search.transfer_replay import ReplayStats, replay_onto

logger = logging.getLogger(__name__)

#: Measured schedules kept as possible bases (best first), beyond ``from_best``.
SPARE_BASES = 4


@dataclass
class RefineTally:
    """What local refinement did over a run's tasks (shared by every task's search).

    Attributes:
        rounds: Rounds that looked for neighbours (the task had a measured schedule).
        served: Rounds that got at least one neighbour.
        candidates: Neighbours put in rounds.
        improved: Of them, measured faster than the task's best before them.
        failed: Of them, failed to build or run.
        replay: Replay counts of the neighbours tried.
        remapped: Replays dropped because TVM did not take the moved decision.
        seconds: Time spent finding, replaying and scoring neighbours.
    """

    rounds: int = 0
    served: int = 0
    candidates: int = 0
    improved: int = 0
    failed: int = 0
    replay: ReplayStats = field(default_factory=ReplayStats)
    remapped: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        """One line for the log or the report."""
        return (f"local refinement: {self.candidates} neighbours in {self.served} of "
                f"{self.rounds} rounds, {self.improved} faster than the best before them, "
                f"{self.failed} failed; "
                f"{self.replay.applied} of {self.replay.tried} replays applied, "
                f"{self.remapped} not moved; {self.seconds:.1f} s")


def replay_move(base_trace, move: Move, mod, postprocs: list, tally: RefineTally):
    """``base_trace`` with ``move`` applied, replayed on ``mod``.

    Args:
        base_trace: The base schedule's trace.
        move: The decision to change.
        mod: The task's ``IRModule``.
        postprocs: The task's postprocessors, initialized.
        tally: Counts to add to.

    Returns:
        The postprocessed ``Schedule``, or ``None`` (replay failed, refused, or its
        decisions differ from the base's elsewhere than in ``move``, or not at all).
    """
    inst = sampling(base_trace)[move.index][0]
    value = list(move.decision) if isinstance(move.decision, tuple) else move.decision
    sch = replay_onto(base_trace.with_decision(inst, value, True), mod, postprocs,
                      tally.replay, refit=False)
    if sch is None:
        return None
    base, got = decisions(base_trace), decisions(sch.trace)
    differ = [i for i, (a, b) in enumerate(zip(base, got, strict=False)) if a != b]
    if len(base) != len(got) or differ != [move.index]:
        tally.remapped += 1
        return None
    return sch


class Refiner:
    """One task's measured schedules and the neighbourhoods of its best.

    Args:
        params: The ``search_params.refine`` settings.
        seed: Seed of the neighbour sampling.
    """

    def __init__(self, params: RefineConfig, seed: int = 0) -> None:
        self.params = params
        self.rng = random.Random(seed)
        self.measured: dict[int, float] = {}  # structural hash -> throughput (0: failed)
        self.best: list[tuple[float, int, object]] = []  # (throughput, hash, schedule)
        self.outcomes: dict[int, dict[Move, int | None]] = {}  # base -> move -> hash

    @property
    def best_throughput(self) -> float:
        """The task's best measured throughput (0 before any valid measurement)."""
        return self.best[0][0] if self.best else 0.0

    def observe(self, h: int, sch, throughput: float) -> None:
        """Record a measured schedule (``throughput``: 1 / seconds, 0 when it failed)."""
        self.measured[h] = max(throughput, self.measured.get(h, 0.0))
        if throughput <= 0 or any(b == h for _, b, _ in self.best):
            return
        self.best.append((throughput, h, sch))
        self.best.sort(key=lambda t: -t[0])
        del self.best[self.params.from_best + SPARE_BASES:]
        kept = {b for _, b, _ in self.best}
        self.outcomes = {b: o for b, o in self.outcomes.items() if b in kept}

    def _open_moves(self, base: int, sch, exclude: set[int]) -> list[Move]:
        """The base's moves whose schedule may still be measured (never replayed, or
        replayed to a schedule neither measured nor in ``exclude``)."""
        known = self.outcomes.setdefault(base, {})
        out = []
        for m in moves(sch.trace):
            if m not in known:
                out.append(m)
            elif known[m] is not None and known[m] not in self.measured \
                    and known[m] not in exclude:
                out.append(m)
        return out

    def propose(self, mod, postprocs: list, k: int, exclude: set[int],
                score: Callable[[list], list[float]] | None, tally: RefineTally) -> list:
        """At most ``k`` unmeasured neighbours of the task's best, best predicted first.

        Args:
            mod: The task's ``IRModule``.
            postprocs: The task's postprocessors, initialized.
            k: How many at most.
            exclude: Structural hashes to leave out (the round's other candidates).
            score: Scores a list of ``Schedule`` s, higher better (``None``: keep the
                sampling order).
            tally: Counts to add to.

        Returns:
            ``(structural hash, Schedule)`` pairs.
        """
        from tvm_ffi import structural_hash

        if k <= 0:
            return []
        options: list[tuple[int, object, Move]] = []
        bases = 0
        for _, base, sch in self.best:
            if bases >= self.params.from_best:
                break
            open_moves = self._open_moves(base, sch, exclude)
            if open_moves:  # else a local optimum: every neighbour is measured
                bases += 1
                options += [(base, sch, m) for m in open_moves]
        if not options:
            return []
        picked = self.rng.sample(options, min(self.params.pool, len(options)))
        found: list[tuple[int, object]] = []
        seen: set[int] = set()
        for base, sch, m in picked:
            nsch = replay_move(sch.trace, m, mod, postprocs, tally)
            h = None if nsch is None else structural_hash(nsch.mod)
            self.outcomes[base][m] = h
            if h is None or h in self.measured or h in exclude or h in seen:
                continue
            seen.add(h)
            found.append((h, nsch))
        if score is not None and len(found) > k:
            scores = list(score([s for _, s in found]))
            order = sorted(range(len(found)), key=lambda i: -scores[i])
            found = [found[i] for i in order]
        return found[:k]
