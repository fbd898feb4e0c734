"""Every method scored on every workload, k and seed, and the scores aggregated."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bench.accuracy.workloads import EvalWorkload, relative_targets, split_indices
from metatune import metrics

KS = (0, 8, 16, 32, 64)
METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "mse": metrics.mse,
    "mse_d": metrics.mse_top,
    "pairwise": metrics.pairwise_accuracy,
    "top5_recall": metrics.top_k_recall,
}


def evaluate(workloads: list[EvalWorkload], methods: dict, ks: tuple[int, ...], seeds: list[int],
             query: int, progress: Callable[[str], None] | None = None) -> list[dict]:
    """Score every method on every workload, k and seed.

    Args:
        workloads: The scored workloads.
        methods: Name -> a method (``scores(w, support, query, seed)``,
            :mod:`bench.accuracy.methods`).
        ks: Support set sizes.
        seeds: Seeds of the support and query draws (:func:`split_indices`).
        query: Query candidates per workload.
        progress: Called with a line after each (seed, workload).

    Returns:
        One row per (method, k, seed, workload) with the four metrics.
    """
    rows = []
    for seed in seeds:
        for w in workloads:
            for k in ks:
                support, q = split_indices(len(w.seconds), k, query, seed)
                target = relative_targets(w.seconds, support)[q]
                for name, method in methods.items():
                    pred = method.scores(w, support, q, seed)
                    row = {"method": name, "k": k, "seed": seed, "workload": w.name}
                    row.update({m: f(pred, target) for m, f in METRICS.items()})
                    rows.append(row)
            if progress:
                progress(f"seed {seed}: {w.name}")
    return rows


def summarize(rows: list[dict]) -> dict:
    """Per method and k: each metric's mean over workloads, median (min, max) over seeds.

    Returns:
        ``{method: {k: {metric: {"median", "min", "max"}}}}`` (k as a string key).
    """
    out: dict = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        out[method] = {}
        for k in sorted({r["k"] for r in rows}):
            sel = [r for r in rows if r["method"] == method and r["k"] == k]
            seeds = sorted({r["seed"] for r in sel})
            out[method][str(k)] = {}
            for m in METRICS:
                per_seed = [float(np.nanmean([r[m] for r in sel if r["seed"] == s]))
                            for s in seeds]
                out[method][str(k)][m] = {"median": float(np.median(per_seed)),
                                          "min": float(min(per_seed)),
                                          "max": float(max(per_seed))}
    return out
