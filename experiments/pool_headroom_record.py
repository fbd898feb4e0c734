# Last ran on commit f1232c5
# Since then (not run again): the pool is recorded by an observer of the BO search instead
# of patching it, and measured whole after the run (bench.common.measure), not by tuning.
"""The measuring of :mod:`experiments.pool_headroom`: one BO round's whole pool,
recorded as the BO search scored it and measured after the run."""

from __future__ import annotations

import dataclasses

import numpy as np

from bench.common import measure, tune_tasks
from experiments.pool_headroom_figures import BATCH, RETIMED, choice_bests


class PoolRecorder:
    """Records round ``full_round``'s whole pool as the BO search scored and chose it: an
    observer of :class:`tuner.search.bo.BatchBOSearch` (``tuner.search.bo.observing``).

    Rounds up to it run as in tuning (the BO search picks ``BATCH``, tuning measures
    them); the pool is measured whole after the run (:func:`measure_pool`).

    Args:
        full_round: The round whose pool is measured whole (1: the first).
        fresh_model: The same cost model as tuning's, never updated: it scores the full
            round's pool as the model did before the task's first measurement.
        variants: Name -> another cost model, never updated during the run: before the
            full round is scored it adapts on all the task's measurements so far, as
            tuning's model did round by round.

    Attributes:
        rows: One per pool candidate of the full round, the BO search's picks first:
            ``prior`` (the cost model's score, adapted online to the rounds before),
            ``prior0`` (the unadapted model's), ``picked`` (chosen by BO), ``seconds``
            (filled by :func:`measure_pool`; ``None``: failed), with variants ``variants``
            (name -> score).
        mods: The scheduled modules of those candidates (what is measured).
        history_best_s: The task's best seconds before the full round (``None`` in round 1).
    """

    def __init__(self, full_round: int, fresh_model=None,
                 variants: dict | None = None) -> None:
        self.full_round = int(full_round)
        self.fresh_model = fresh_model
        self.variants = dict(variants or {})
        self.measured: tuple[list, list] = ([], [])  # candidates, results before the round
        self.rows: list[dict] = []
        self.mods: list = []
        self.history_best_s: float | None = None

    def on_results(self, search, candidates: list, results: list) -> None:
        """Keep the measurements before the full round (the variants adapt on them)."""
        if search.rounds < self.full_round:
            self.measured[0].extend(candidates)
            self.measured[1].extend(results)

    def on_round(self, search, pool: list, chosen: list[int], scores: np.ndarray) -> None:
        """In the full round: the task's best so far, and every pool candidate's scores."""
        if search.rounds != self.full_round:
            return
        if search.hist_y:
            best = max(search.hist_y)  # throughput; 0: every measurement failed
            self.history_best_s = 1.0 / best if best else None
        picked = set(chosen)
        order = chosen + [i for i in range(len(pool)) if i not in picked]
        candidates = [pool[i] for i in order]
        prior0 = (np.asarray(self.fresh_model.predict(search.context, candidates), float)
                  if self.fresh_model is not None else [None] * len(candidates))
        variants = {}
        for name, model in self.variants.items():
            if self.measured[0]:
                model.update(search.context, *self.measured)
            variants[name] = np.asarray(model.predict(search.context, candidates), float)
        for n, (i, p0) in enumerate(zip(order, prior0, strict=False)):
            row = {"prior": float(scores[i]), "picked": i in picked,
                   "prior0": None if p0 is None else float(p0), "seconds": None}
            if variants:
                row["variants"] = {name: float(v[n]) for name, v in variants.items()}
            self.rows.append(row)
            self.mods.append(pool[i].sch.mod)


def measure_pool(task, overrides: list[str], seed: int, full_round: int,
                 variants: list[tuple[str, list[str]]] = ()) -> dict:
    """Tune ``task`` (a :class:`tuner.engine.tasks.TaskInfo`) to round ``full_round``
    (``BATCH`` a round), then measure that round's whole pool as the BO search saw it, and
    time the schedules compared a second time.
    ``variants``: ``(name, overrides)`` of other cost models that adapt on the same
    measurements and score the same pool (:class:`PoolRecorder`).

    Returns:
        ``seed``, ``round``, ``history_best_s`` (the task's best before the round),
        ``pool``, ``measured_ok``, ``rows`` (:class:`PoolRecorder`'s, with
        ``seconds_again`` where timed twice), ``tuning_seconds``, ``checkpoint``.
    """
    import tuner.search.bo as bo
    from tuner.app.config import load_tune_config
    from tuner.app.preflight import with_model_sources
    from tuner.app.session import build_cost_model
    from tuner.engine.targets import resolve_target

    overrides = [*overrides, f"trials={full_round * BATCH}", f"trials_per_round={BATCH}",
                 f"seed={seed}"]  # the task stops after the full round
    info = resolve_target("llvm")

    def model(more: list[str]):
        cfg = load_tune_config(overrides=[*overrides, *more])
        return build_cost_model(with_model_sources(cfg, info), info)

    recorder = PoolRecorder(full_round, model([]),
                            {name: model(more) for name, more in variants})
    with bo.observing(recorder):
        tuned = tune_tasks([task], overrides, prefix="pool-headroom-")
    rows = recorder.rows
    runner = {k: v for k, v in dataclasses.asdict(tuned.cfg.runner).items()
              if k not in ("kind", "rpc")}  # timed locally, as the local runner does
    for row, secs in zip(rows, measure(recorder.mods, info, runner), strict=False):
        row["seconds"] = secs
    ok = [i for i, r in enumerate(rows) if r["seconds"] is not None]
    pool_top = sorted(ok, key=lambda i: rows[i]["seconds"])[:RETIMED]
    again = sorted({*pool_top, *(i for i in choice_bests(rows, full_round).values()
                                 if rows[i]["seconds"])})
    times = measure([recorder.mods[i] for i in again], info, runner)
    for i, secs in zip(again, times, strict=False):
        rows[i]["seconds_again"] = secs
    return {"seed": seed, "round": full_round, "history_best_s": recorder.history_best_s,
            "pool": len(rows), "measured_ok": len(ok), "rows": rows,
            "tuning_seconds": tuned.outcome.tuning_seconds,
            "checkpoint": tuned.cfg.metatune.checkpoint
            if tuned.cfg.cost_model == "metatune" else None}
