"""Batch Bayesian-optimization search as a MetaSchedule ``PySearchStrategy`` (paper section 6).

Each round:

1. **Pool.** MetaSchedule's evolutionary search proposes ``pool_size`` candidates: random
   samples of the design space and mutations of the best measured schedules, evolved
   under the cost model (it is the sampler, not the chooser). Unchosen candidates of the
   previous round stay in the pool (the best ``carry`` of them by the cost model).
   Candidates measured before, in this run or in the database, are dropped. Optionally a
   larger "cold" sampler proposes while the task has no measurement yet
   (``cold_population``, ``cold_genetic_iters``; ``docs/lab/search/cold_start.md``). If TVM's
   sampler raises (one stored record that does not re-apply to the task fails its whole
   population: issue 61), the round draws again from a sampler not seeded from the database;
   if that raises too, the round uses the carried-over candidates; after four failed draws
   in a row the task stops (with a warning) instead of the whole run.
2. **Features.** Each candidate's knob vector (:mod:`tuner.search.knobs`) and the cost model's
   prediction (the MetaTune model fine-tuned online on this task, or any other model).
3. **Choice.** A GP over knob vectors with the prediction as its prior mean, fitted to this
   task's measurements, picks the batch with a Monte-Carlo batch acquisition
   (:func:`tuner.search.bo_select.select_batch`).

Measurements that failed enter the GP as zero throughput. The GP runs on CUDA or ROCm when
torch sees one, on the CPU otherwise.

Experiments that study the search watch its rounds through :data:`OBSERVERS` (none by
default; :func:`observing` adds one for a while).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from metatune.device import resolve_device
from metatune.records import measured_seconds
from tuner.engine.database import as_candidate
from tuner.engine.norepeat import PreloadedRecords
from tuner.search.bo_select import select_batch
from tuner.search.knobs import KnobSpace
from tuner.search.params import BOConfig

logger = logging.getLogger(__name__)

#: Observers of every :class:`BatchBOSearch`'s rounds; empty unless an experiment adds one
#: (:func:`observing`). An observer may define ``on_round(search, pool, chosen, scores)``,
#: called once a round's batch is chosen (``pool``: the round's candidates, ``chosen``: the
#: indices of the batch in it, ``scores``: the cost model's score of each), and
#: ``on_results(search, candidates, results)``, called with each batch's measurements. They
#: watch only: what they return is ignored.
OBSERVERS: list = []


@contextmanager
def observing(observer) -> Iterator:
    """Add ``observer`` to :data:`OBSERVERS` for the ``with`` block (removed even if it
    raises)."""
    OBSERVERS.append(observer)
    try:
        yield observer
    finally:
        OBSERVERS.remove(observer)


def _notify(event: str, *args) -> None:
    """Call ``event`` on each observer that defines it."""
    for observer in list(OBSERVERS):
        hook = getattr(observer, event, None)
        if hook is not None:
            hook(*args)


@derived_object
class BatchBOSearch(PySearchStrategy, PreloadedRecords):
    """Evolutionary candidate pool, GP + batch acquisition choice.

    Args:
        evolutionary: Keyword arguments of MetaSchedule's ``EvolutionarySearch`` (the
            ``search_params`` section but ``bo``).
        params: :class:`tuner.search.params.BOConfig` (``search_params.bo``; valid since it
            was made, not checked again; ``None``: the defaults).
        seed: Seed of the acquisition's sampler.
        device: Where the GP runs (:mod:`metatune.device`: ``auto``, ``cpu``, ``cuda``,
            ``rocm``).
    """

    def __init__(self, evolutionary: dict, params: BOConfig | None = None, seed: int = 0,
                 device: str = "auto") -> None:
        super().__init__()
        self.evolutionary = dict(evolutionary)
        self.params = params or BOConfig()
        self.seed = int(seed)
        self.device = resolve_device(device)
        self.inner = None
        self.cold = None
        self.context = None
        self._reset()

    def _reset(self) -> None:
        self.knobs = KnobSpace()
        self.max_trials = 0
        self.batch = 0
        self.trials = 0
        self.rounds = 0
        self.cost_model = None
        self.seen: set[int] = set()
        self.hist_cands: list = []
        self.hist_y: list[float] = []  # throughput 1 / seconds, 0 for failures
        self.leftover: list = []
        self.leftover_hashes: list[int] = []  # theirs, kept: not hashed again
        self.pool_hashes: list[int] = []  # the structural hashes of the last pool drawn
        self.cold_failed = False
        self.unseeded = None  # the sampler not seeded from the database, once needed
        self.tuning_args: tuple = ()  # pre_tuning's design spaces, database, cost model

    def _initialize_with_tune_context(self, context) -> None:
        self.context = context
        self.inner = self._sampler(self.params.population, self.params.genetic_iters)
        self.cold = None
        if self.params.cold_population or self.params.cold_genetic_iters:
            self.cold = self._sampler(self.params.cold_population or self.params.population,
                                      self.params.cold_genetic_iters or self.params.genetic_iters)

    def _sampler(self, population: int, genetic_iters: int, seeded: bool = True):
        """A MetaSchedule evolutionary search proposing this task's candidate pools
        (``seeded=False``: its population never starts from the database's best records)."""
        from tvm.s_tir import meta_schedule as ms

        params = dict(self.evolutionary, population_size=population,
                      genetic_num_iters=genetic_iters)
        if not seeded:
            params["init_measured_ratio"] = 0.0
        params["init_min_unmeasured"] = min(params.get("init_min_unmeasured", 50),
                                            population // 2)
        sampler = ms.search_strategy.EvolutionarySearch(**params)
        sampler._initialize_with_tune_context(self.context)
        return sampler

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None,
                   cost_model=None) -> None:
        known = self.take_measured(database, self.context.mod,
                                   list(self.context.space_generator.postprocs or []))
        self._reset()
        self.max_trials = int(max_trials)
        self.batch = int(num_trials_per_iter)
        self.cost_model = cost_model
        self.seen = {h for h, _, _ in known}
        known.sort(key=lambda k: -_throughput(k[2]))  # a resumed run starts from the best
        for _, sch, secs in known[: self.params.max_history]:
            self.hist_cands.append(as_candidate(sch))
            self.hist_y.append(_throughput(secs))
        # The sampler proposes a pool each round; it stops only when we do.
        self.tuning_args = (design_spaces, database, cost_model)
        for sampler in self._samplers():
            sampler.pre_tuning(1 << 30, self.params.pool_size, *self.tuning_args)

    def post_tuning(self) -> None:
        for sampler in self._samplers():
            sampler.post_tuning()
        if self.unseeded is not None:
            self.unseeded.post_tuning()
            self.unseeded = None

    def _draw_unseeded(self, why: str):
        """The round's candidates from a sampler not seeded from the database (made on the
        first failure of the seeded one: a stored record that does not re-apply fails
        TVM's whole population), or ``None`` if it fails too."""
        if self.unseeded is None:
            logger.warning("%s: the evolutionary sampler failed (%s); when it fails, a "
                           "round samples without seeding from the database's best records",
                           self.context.task_name, why)
            self.unseeded = self._sampler(self.params.population, self.params.genetic_iters,
                                          seeded=False)
            self.unseeded.pre_tuning(1 << 30, self.params.pool_size, *self.tuning_args)
        try:
            return self.unseeded.generate_measure_candidates()
        except Exception as err:  # noqa: BLE001 - see _pool
            logger.debug("the unseeded sampler failed too: %s", err)
            return None

    def current_sampler(self):
        """The sampler proposing this round's pool: the cold one (if configured) while the
        task has no measurement, when the cost model is the only guide; else the regular."""
        cold = self.cold is not None and not self.cold_failed and not self.hist_y
        return self.cold if cold else self.inner

    def _samplers(self) -> list:
        return [self.inner] + ([self.cold] if self.cold is not None else [])

    def _pool(self) -> list | None:
        from tvm_ffi import structural_hash

        sampler = self.current_sampler()
        try:
            fresh = sampler.generate_measure_candidates()
        except Exception as err:  # noqa: BLE001 - TVM's sampler fails on some traces
            # (seen: "The block no longer exists in the IRModule" on a winograd task); the
            # round draws unseeded, else goes on with the carried-over candidates, and the
            # tuning run survives.
            why = (str(err).strip().splitlines() or [type(err).__name__])[-1]
            if sampler is self.cold:
                self.cold_failed = True  # from now on the regular sampler proposes
            fresh = self._draw_unseeded(why)
            sampler = self.unseeded
            if fresh is None:
                logger.warning("%s: the evolutionary sampler failed (%s); this round uses "
                               "the carried-over candidates", self.context.task_name, why)
                self.pool_hashes = list(self.leftover_hashes)
                return list(self.leftover)
        if fresh is None and not self.leftover:
            return None
        drawn = fresh is not None
        fresh = list(fresh or [])
        pool, self.pool_hashes, taken = [], [], set()
        for cand, h in zip([*fresh, *self.leftover],
                           [*(structural_hash(c.sch.mod) for c in fresh), *self.leftover_hashes],
                           strict=True):
            if h not in self.seen and h not in taken:
                taken.add(h)
                self.pool_hashes.append(h)
                pool.append(cand)
        if drawn:  # the sampler's own trial counter must advance
            sampler.notify_runner_results(fresh, [_failed()] * len(fresh))
        return pool

    def _predict(self, candidates: list) -> np.ndarray:
        """The cost model's scores of ``candidates`` (zeros without one)."""
        if self.cost_model is None or not candidates:
            return np.zeros(len(candidates))
        return np.asarray(self.cost_model.predict(self.context, candidates), dtype=float)

    def generate_measure_candidates(self):
        if self.trials >= self.max_trials:
            return None
        pool = None
        for _ in range(4):  # a pool of nothing but measured candidates: draw again
            pool = self._pool()
            if pool is None or pool:
                break
        if not pool:
            return None
        q = min(self.batch, self.max_trials - self.trials)
        prior = self._predict(self.hist_cands + pool)
        hist_prior, pool_prior = prior[: len(self.hist_cands)], prior[len(self.hist_cands):]
        y = np.asarray(self.hist_y, dtype=float)
        chosen = select_batch(
            self.knobs.matrix(pool), pool_prior, self.knobs.matrix(self.hist_cands), hist_prior,
            y / y.max() if len(y) and y.max() > 0 else y, q, self.params,
            seed=self.seed + self.rounds, device=self.device)
        picked = set(chosen)
        rest = sorted((i for i in range(len(pool)) if i not in picked),
                      key=lambda i: -pool_prior[i])
        self.leftover = [pool[i] for i in rest[: self.params.carry]]
        self.leftover_hashes = [self.pool_hashes[i] for i in rest[: self.params.carry]]
        self.rounds += 1
        if OBSERVERS:
            _notify("on_round", self, list(pool), list(chosen), np.array(pool_prior))
        return [pool[i] for i in chosen]

    def notify_runner_results(self, measure_candidates, results) -> None:
        from tvm_ffi import structural_hash


        cands = list(measure_candidates)
        for cand, res in zip(cands, results, strict=False):
            self.seen.add(structural_hash(cand.sch.mod))
            secs = measured_seconds(res.run_secs, res.error_msg)
            self.hist_cands.append(cand)
            self.hist_y.append(0.0 if secs is None else 1.0 / secs)
        self.trials += len(results)
        self._trim_history()
        if OBSERVERS:
            _notify("on_results", self, cands, list(results))

    def _trim_history(self) -> None:
        """Keep the best half and the most recent rest of ``max_history`` measurements."""
        n = self.params.max_history
        if len(self.hist_y) <= n:
            return
        order = np.argsort(-np.asarray(self.hist_y), kind="stable")
        best = set(order[: n // 2].tolist())
        recent = [i for i in range(len(self.hist_y)) if i not in best][-(n - len(best)):]
        keep = sorted(best | set(recent))
        self.hist_cands = [self.hist_cands[i] for i in keep]
        self.hist_y = [self.hist_y[i] for i in keep]

    def clone(self) -> "BatchBOSearch":
        return BatchBOSearch(self.evolutionary, self.params, self.seed, str(self.device))


def _throughput(secs: list[float] | None) -> float:
    """``1 / mean run time`` of a measurement; 0 for a failed one."""
    mean = measured_seconds(secs)
    return 0.0 if mean is None else 1.0 / mean


def _failed():
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    return RunnerResult(None, "not chosen by BO")
