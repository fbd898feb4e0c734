# Last ran on commit 82b5d40
"""The figures of :mod:`experiments.cold_start`: each configuration against the baseline,
overall, per seed and after fewer trials, and the model's accuracy on each batch."""

from __future__ import annotations

import functools

from bench.common import geomean, median


def best_at(run: dict, trials: int) -> float | None:
    """The best latency (ms) a run had reached after ``trials`` trials, from its curve
    (``None`` without a curve, as in runs recorded before curves were, or before any
    valid measurement)."""
    seen = [ms for trial, ms in run.get("curve") or [] if trial <= trials and ms]
    return min(seen) if seen else None


def _over_base(runs: list[dict], configs: list[str], workloads: list[str],
               value) -> tuple[dict, dict, dict]:
    """Each configuration's per-workload value (median over seeds), the geometric mean
    over workloads of its value over the baseline's, and the same within each seed.

    Args:
        runs: The runs (``config``, ``workload``, ``seed``).
        configs: Configuration names; the first is the baseline.
        workloads: Workload names.
        value: ``run -> float | None``, e.g. its best latency.

    Returns:
        ``{config: {workload: median}}``, ``{config: geomean}``,
        ``{config: {seed: geomean}}`` (paired: the workloads both runs of a seed have).
    """
    best = {c: {w: median([value(r) for r in runs if r["config"] == c
                           and r["workload"] == w]) for w in workloads} for c in configs}
    base = best[configs[0]]
    seeds = sorted({r["seed"] for r in runs})
    by_run = {(r["config"], r["workload"], r["seed"]): value(r) for r in runs}
    overall, each = {}, {}
    for config in configs:
        ratios = [b / base[w] for w, b in best[config].items() if b and base[w]]
        overall[config] = geomean(ratios) if ratios else None
        each[config] = {}
        for seed in seeds:
            pairs = [(by_run.get((config, w, seed)), by_run.get((configs[0], w, seed)))
                     for w in workloads]
            seed_ratios = [a / b for a, b in pairs if a and b]
            each[config][str(seed)] = geomean(seed_ratios) if seed_ratios else None
    return best, overall, each


def batch_pairwise(runs: list[dict], bounds: list[int],
                   key: str = "pairwise") -> dict[str, float | None]:
    """Mean pairwise accuracy of the cost model on each batch before it was measured,
    over the rounds of ``runs`` that end in each budget range: does the model get better
    at ranking the task's candidates as it measures them (online adaptation in tuning)?
    Or the mean of another per-round value (``key``: ``novelty``, ``spread``; see
    :func:`tuner.app.rounds.batch_exploration`).

    Args:
        runs: Runs with ``batch_accuracy`` rows (``trial``, ``pairwise``, ...).
        bounds: Increasing trial counts, e.g. ``[32, 64, 128]``: ranges 1-32, 33-64, ...
        key: The per-round value averaged.

    Returns:
        ``{"1-32": mean or None, "33-64": ..., ...}``.
    """
    out, low = {}, 0
    for high in bounds:
        values = [row[key] for r in runs for row in r.get("batch_accuracy") or []
                  if low < row["trial"] <= high and row.get(key) is not None]
        out[f"{low + 1}-{high}"] = sum(values) / len(values) if values else None
        low = high
    return out


def summarize(runs: list[dict], configs: list[str], at: tuple[int, ...] = (),
              trials: int | None = None) -> dict:
    """Per configuration: best per workload (median over seeds), the geometric mean over
    workloads of its best over the baseline's (overall and per seed), the same after
    each budget in ``at`` (from the runs' curves), and the median search seconds."""
    workloads = list(dict.fromkeys(r["workload"] for r in runs))
    best, overall, each = _over_base(runs, configs, workloads, lambda r: r["best_ms"])
    early = {n: _over_base(runs, configs, workloads, functools.partial(best_at, trials=n))
             for n in at}
    out = {}
    for config in configs:
        mine = [r for r in runs if r["config"] == config]
        ratios = [b / best[configs[0]][w] for w, b in best[config].items()
                  if b and best[configs[0]][w]]
        out[config] = {
            "median_best_ms": best[config],
            "geomean_over_base": overall[config],
            "geomean_over_base_per_seed": each[config],
            "at_trials": {str(n): {"geomean_over_base": e[1][config],
                                   "per_seed": e[2][config]} for n, e in early.items()},
            **{f"batch_{key}": batch_pairwise(
                mine, sorted({*at, trials or max((r.get("trials") or 0 for r in mine),
                                                 default=0)}), key)
               for key in ("pairwise", "novelty", "spread")},
            "workloads_better": sum(x < 1.0 for x in ratios),
            "median_search_s": median([r["search_s"] for r in mine]),
            "median_tuning_s": median([r.get("tuning_seconds") for r in mine]),
            "runs_without_result": sum(r["best_ms"] is None for r in mine),
        }
    return out
