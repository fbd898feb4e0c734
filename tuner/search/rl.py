"""RL search after Chameleon (Ahn et al., ICLR 2020) as a MetaSchedule ``PySearchStrategy``.

Each round:

1. **Starts.** ``rollouts`` start points: the best measured points of the task
   (``best_starts`` of them) and random points of its design spaces
   (:class:`tuner.search.rl_space.DecisionSpace`).
2. **Adaptive exploration.** An actor-critic policy walks from each start through the
   candidates' sampling decisions, one move (down, stay, up) per decision per step,
   rewarded by the cost model's predicted score of each point it visits, and learns by
   PPO after the round (:class:`tuner.search.rl_explore.Explorer`). The policy lives as
   long as the task's tuning, so later rounds walk better.
3. **Adaptive sampling.** The ``keep`` best-predicted unmeasured points visited are
   clustered by k-means, ``k`` at the knee of the loss, and the best of each cluster is
   measured (:func:`tuner.search.rl_sampling.representatives`): at most the batch size,
   often fewer.

A point that failed to build or run, or does not build into a valid schedule, is never
proposed again (rollouts that move onto it stay where they are, with a penalty). Resumed
runs start from the database: its schedules are never proposed again and its best ones
are start points. The policy runs on CUDA or ROCm when torch sees one, on the CPU
otherwise.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from metatune.device import resolve_device
from metatune.records import measured_seconds
from tuner.engine.norepeat import PreloadedRecords
from tuner.search.params import RLConfig
from tuner.search.rl_explore import Explorer
from tuner.search.rl_sampling import representatives
from tuner.search.rl_space import DecisionSpace, Point

logger = logging.getLogger(__name__)

#: Rounds of rollouts tried in a row for one batch before the task is taken as exhausted.
_ATTEMPTS = 3


@derived_object
class RLSearch(PySearchStrategy, PreloadedRecords):
    """PPO rollouts over the decision space, one measured candidate per cluster.

    Args:
        params: :class:`tuner.search.params.RLConfig` (``search_params.rl``; valid since it
            was made, not checked again; ``None``: the defaults).
        seed: Seed of the policy, its rollouts, the random starts and k-means.
        device: Where the policy runs (:mod:`metatune.device`: ``auto``, ``cpu``, ``cuda``,
            ``rocm``).
    """

    def __init__(self, params: RLConfig | None = None, seed: int = 0,
                 device: str = "auto") -> None:
        super().__init__()
        self.params = params or RLConfig()
        self.seed = int(seed)
        self.device = resolve_device(device)
        self.context = None
        self._reset()

    def _reset(self) -> None:
        self.max_trials = 0
        self.batch = 0
        self.trials = 0
        self.rounds = 0
        self.cost_model = None
        self.space: DecisionSpace | None = None
        self.explorer: Explorer | None = None
        self.seen: set[int] = set()  # structural hashes of the schedules measured
        self.invalid: set[Point] = set()  # points that failed to build, or to measure
        self.measured: dict[Point, float] = {}  # valid measured points -> throughput
        self.proposed: dict[int, Point] = {}  # the last batch: hash -> point
        self.built: dict[Point, tuple | None] = {}  # this round's builds
        self.last_round: dict = {}

    def _initialize_with_tune_context(self, context) -> None:
        self.context = context

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None,
                   cost_model=None) -> None:
        postprocs = list(self.context.space_generator.postprocs or [])
        known = self.take_measured(database, self.context.mod, postprocs)
        self._reset()
        self.max_trials = int(max_trials)
        self.batch = int(num_trials_per_iter)
        self.cost_model = cost_model
        self.space = DecisionSpace(self.context.mod, list(design_spaces), postprocs)
        self.explorer = Explorer(self.space, self.params, self.seed, self.device)
        for h, sch, secs in known:  # a resumed run starts from its best, never repeats
            self.seen.add(h)
            self._record(self.space.point_of(sch.trace), measured_seconds(secs))

    def post_tuning(self) -> None:
        self.built = {}

    def _record(self, point: Point | None, secs: float | None) -> None:
        if point is None:
            return
        if secs is None:
            self.invalid.add(point)
            self.measured.pop(point, None)
        elif point not in self.invalid:
            self.measured[point] = max(self.measured.get(point, 0.0), 1.0 / secs)

    def generate_measure_candidates(self):
        if self.trials >= self.max_trials:
            return None
        q = min(self.batch, self.max_trials - self.trials)
        for attempt in range(_ATTEMPTS):
            batch = self._round(q, random_only=attempt > 0)
            if batch:
                return batch
        logger.warning("%s: %d rounds of rollouts found no unmeasured valid candidate: "
                       "stopping this task", self.context.task_name, _ATTEMPTS)
        return None

    def _round(self, q: int, random_only: bool) -> list:
        """One round: starts, rollouts and the PPO update, then the clustered choice."""
        start = time.perf_counter()
        rng = np.random.default_rng([self.seed, self.rounds, int(random_only)])
        self.built = {}
        starts = self._starts(rng, random_only)
        self.rounds += 1
        if not starts:
            return []
        found = self.explorer.explore(starts, self._resolve, self._score)
        fresh, hashes = [], set()
        for point, score in sorted(found.scores.items(), key=lambda kv: -kv[1]):
            _, h, _ = self.built[point]
            if h not in self.seen and h not in hashes and point not in self.invalid:
                hashes.add(h)
                fresh.append((point, score))
        fresh = fresh[: max(self.params.keep, q)]
        explored = time.perf_counter()
        chosen = representatives(self.space.state([p for p, _ in fresh]),
                                 np.asarray([s for _, s in fresh]), q,
                                 self.params.min_clusters, seed=self.seed + self.rounds)
        self.proposed = {self.built[fresh[i][0]][1]: fresh[i][0] for i in chosen}
        self.last_round = {
            "starts": len(starts), "steps": found.steps, "visited": len(found.scores),
            "fresh": len(fresh), "chosen": len(chosen),
            "start_score": float(np.mean(found.start_scores)),
            "end_score": float(np.mean(found.end_scores)),
            "explore_s": explored - start, "sample_s": time.perf_counter() - explored}
        logger.debug("%s round %d: %s", self.context.task_name, self.rounds, self.last_round)
        return [self.built[fresh[i][0]][0] for i in chosen]

    def _starts(self, rng: np.random.Generator, random_only: bool) -> list[Point]:
        """Measured points (``best_starts`` of the rollouts: the best one, and the others
        drawn from the ``best_pool`` best) and random valid points for the rest, all built."""
        n = self.params.rollouts
        best = [] if random_only else sorted(self.measured, key=lambda p: -self.measured[p])
        pool = best[: max(1, self.params.best_pool)]
        n_best = min(len(pool), int(round(n * self.params.best_starts)))
        picked = pool[:n_best]
        if 1 < n_best < len(pool):  # the best one, and the rest drawn from the pool
            rest = rng.choice(np.arange(1, len(pool)), size=n_best - 1, replace=False)
            picked = pool[:1] + [pool[i] for i in sorted(rest)]
        starts = []
        for point in picked:
            got = self._resolve(point)
            if got is not None and got not in starts:
                starts.append(got)
        for point in self.space.random_points(4 * n, rng):
            if len(starts) >= n:
                break
            got = self._resolve(point)
            if got is not None and got not in starts:
                starts.append(got)
        return starts

    def _resolve(self, point: Point) -> Point | None:
        """Build a point (once a round): the point TVM built, or ``None`` if invalid."""
        from tvm_ffi import structural_hash

        if point in self.invalid:
            return None
        if point not in self.built:
            made = self.space.build(point)
            if made is None:
                self.invalid.add(point)  # the same decisions never build
                self.built[point] = None
            else:
                cand, applied = made
                entry = (cand, structural_hash(cand.sch.mod), applied)
                self.built[point] = entry
                self.built.setdefault(applied, entry)
        entry = self.built[point]
        if entry is None or entry[2] in self.invalid:
            return None
        return entry[2]

    def _score(self, points: list[Point]) -> np.ndarray:
        """The cost model's predicted score of built points (zeros without a model)."""
        if self.cost_model is None or not points:
            return np.zeros(len(points))
        cands = [self.built[p][0] for p in points]
        return np.asarray(self.cost_model.predict(self.context, cands), dtype=float)

    def notify_runner_results(self, measure_candidates, results) -> None:
        from tvm_ffi import structural_hash

        for cand, res in zip(list(measure_candidates), results, strict=False):
            h = structural_hash(cand.sch.mod)
            self.seen.add(h)
            point = self.proposed.get(h) or self.space.point_of(cand.sch.trace)
            self._record(point, measured_seconds(res.run_secs, res.error_msg))
        self.trials += len(results)

    def clone(self) -> "RLSearch":
        return RLSearch(self.params, self.seed, str(self.device))
