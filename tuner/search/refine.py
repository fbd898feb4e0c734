"""Local refinement around each task's best: coordinate descent over its decisions, as a
search wrapper (``search_params.refine.enabled``; off by default, not A/B'd yet).

Once a task has a measured schedule, each round it looks at the one-step neighbours of the
task's best measured schedules (each sampling decision changed alone:
:mod:`tuner.search.refine_moves`), replays a sample of them on the task
(:mod:`tuner.search.refine_neighbours`), scores them with the task's cost model (the one
the search uses, fine-tuned on the task's measurements), and puts the best predicted ones
in the round beside the wrapped search's own: at most ``candidates``, at most
``max_share`` of the batch, never a schedule measured before or already in the round.
A neighbour that measures faster becomes the best, and the next rounds move around it:
that is the descent. When every neighbour of a best schedule is measured (a local
optimum), the next best schedule's neighbourhood is used.

The wrapped search (``bo``, ``evolutionary``, ``rl``) is asked for its batch as usual and
told every result, the neighbours' too; its own candidates that no longer fit the round are
dropped (it may propose them again). Rounds before the task's first valid measurement
are the wrapped search's alone.
"""

from __future__ import annotations

import logging
import math
import time

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from metatune.records import measured_seconds
from tuner.engine.database import as_candidate
from tuner.engine.norepeat import NoRepeatSearch, PreloadedRecords
from tuner.search.refine_neighbours import Refiner, RefineTally
from tuner.search.refine_params import RefineConfig

logger = logging.getLogger(__name__)

__all__ = ["RefineConfig", "RefineSearch", "RefineTally", "merge", "with_refine"]


def merge(own: list, refined: list, share: float, batch: int) -> list:
    """The round: the search's own candidates with the neighbours spread among them.

    A neighbour takes the slot at which the neighbours so far would first reach ``share``
    of the candidates up to it, so every prefix of the round (the budget may cut it) keeps
    at most that share, up to rounding; the search's own are cut to make room within
    ``batch``. Neighbours left when the search's own run out go last.

    Args:
        own: The wrapped search's candidates, in its order.
        refined: The neighbours, best first (at most ``floor(share * batch)``).
        share: The neighbours' share of the round at most.
        batch: The round's size.

    Returns:
        At most ``max(batch, len(refined))`` candidates.
    """
    own = list(own)[: max(0, batch - len(refined))]
    out: list = []
    r = o = 0
    while o < len(own) or r < len(refined):
        due = r < len(refined) and math.floor((len(out) + 1) * share + 1e-9) > r
        if due or o >= len(own):
            out.append(refined[r])
            r += 1
        else:
            out.append(own[o])
            o += 1
    return out


def _throughput(secs, error_msg: str | None = None) -> float:
    """``1 / mean run time`` of a measurement; 0 for a failed one."""
    mean = measured_seconds(secs, error_msg)
    return 0.0 if mean is None else 1.0 / mean


@derived_object
class RefineSearch(PySearchStrategy, PreloadedRecords):
    """Adds neighbours of a task's best measured schedules to each of its rounds.

    Args:
        inner: The wrapped search strategy.
        params: The ``search_params.refine`` settings (``None``: the defaults, enabled or
            not: the wrapper refines once made).
        seed: Seed of the neighbour sampling.
        tally: Counts over every task's rounds (:class:`RefineTally`).
    """

    def __init__(self, inner, params: RefineConfig | None = None, seed: int = 0,
                 tally: RefineTally | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.params = params or RefineConfig()
        self.seed = int(seed)
        self.tally = tally if tally is not None else RefineTally()
        self.context = None
        self.postprocs: list = []
        self.batch = 0
        self.cost_model = None
        self.refiner = Refiner(self.params, self.seed)
        self.proposed: set[int] = set()

    def _initialize_with_tune_context(self, context) -> None:
        self.context = context
        self.postprocs = list(context.space_generator.postprocs or [])
        self.inner._initialize_with_tune_context(context)

    def preload_measured(self, known: list) -> None:
        """The task's measured records, replayed once by the ``NoRepeatSearch`` outside
        (handed on to the wrapped search when it takes them)."""
        super().preload_measured(known)
        preload = getattr(self.inner, "preload_measured", None)
        if preload is not None:
            preload(known)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None,
                   cost_model=None) -> None:
        known = self.take_measured(database, self.context.mod, self.postprocs)
        self.batch = int(num_trials_per_iter)
        self.cost_model = cost_model
        self.refiner = Refiner(self.params, self.seed)
        self.proposed = set()
        for h, sch, secs in known:
            self.refiner.observe(h, sch, _throughput(secs))
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database,
                              cost_model)

    def post_tuning(self) -> None:
        logger.debug("%s", self.tally.summary())
        self.refiner = Refiner(self.params, self.seed)  # the schedules kept are let go
        self.inner.post_tuning()

    def _score(self, schedules: list) -> list[float]:
        return list(self.cost_model.predict(self.context,
                                            [as_candidate(s) for s in schedules]))

    def _refined(self, own: list) -> list:
        """This round's neighbours (``MeasureCandidate`` s), none of ``own``."""
        from tvm_ffi import structural_hash

        room = self.params.room(self.batch)
        if room <= 0 or not self.refiner.best:
            return []
        start = time.perf_counter()
        try:
            found = self.refiner.propose(
                self.context.mod, self.postprocs, room,
                {structural_hash(c.sch.mod) for c in own},
                self._score if self.cost_model is not None else None, self.tally)
        except Exception as err:  # noqa: BLE001 - refinement must never stop a tuning run
            why = (str(err).strip().splitlines() or [type(err).__name__])[-1]
            logger.warning("%s: local refinement failed (%s); the round is the search's own",
                           getattr(self.context, "task_name", "task"), why)
            found = []
        self.tally.rounds += 1
        self.tally.served += bool(found)
        self.tally.candidates += len(found)
        self.tally.seconds += time.perf_counter() - start
        self.proposed |= {h for h, _ in found}
        return [as_candidate(s) for _, s in found]

    def generate_measure_candidates(self):
        own = self.inner.generate_measure_candidates()
        if own is None:  # the search has ended the task: refinement does not prolong it
            return None
        own = list(own)
        refined = self._refined(own)
        if not refined:
            return own
        return merge(own, refined, self.params.max_share, self.batch)

    def notify_runner_results(self, measure_candidates, results) -> None:
        from tvm_ffi import structural_hash

        best = self.refiner.best_throughput
        for cand, res in zip(measure_candidates, results, strict=False):
            h = structural_hash(cand.sch.mod)
            y = _throughput(res.run_secs, res.error_msg)
            if h in self.proposed:
                self.tally.improved += y > best > 0
                self.tally.failed += y <= 0
            self.refiner.observe(h, cand.sch, y)
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self) -> RefineSearch:
        return RefineSearch(self.inner.clone(), self.params, self.seed, self.tally)


def with_refine(search, params: RefineConfig | None = None, *, seed: int = 0,
                tally: RefineTally | None = None):
    """``search`` with local refinement around each task's best (see the module docstring).

    Args:
        search: A search strategy, or a :class:`tuner.engine.norepeat.NoRepeatSearch`
            around one (refinement goes inside it, so that the round's budget cut and the
            check against repeats see the neighbours too).
        params: The ``search_params.refine`` settings (``None``: the defaults).
        seed: Seed of the neighbour sampling.
        tally: Counts over the tasks, filled as they run (pass one to read them).

    Returns:
        The wrapped search (a ``NoRepeatSearch`` again if ``search`` was one).
    """
    if isinstance(search, NoRepeatSearch):
        return NoRepeatSearch(RefineSearch(search.inner, params, seed, tally),
                              search.max_regenerate, search.clock, search.budget)
    return RefineSearch(search, params, seed, tally)
