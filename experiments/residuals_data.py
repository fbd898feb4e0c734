# Last ran on commit ee6b9d7
"""What :mod:`experiments.residuals` reads of the datasets: the repeat's run times, the
records in file order, and the per-store and compiled-code features of a workload."""

from __future__ import annotations

import numpy as np


def store_features(w, target) -> np.ndarray:
    """MetaSchedule's per-store features of ``w``'s candidates, pooled per candidate.

    Args:
        w: A :class:`bench.accuracy.EvalWorkload`.
        target: The ``tvm.target.Target`` the features are extracted for.

    Returns:
        An ``n x 3f`` array: each candidate's ``stores x f`` features (``f`` = 164) summed,
        maxed and averaged over its stores.
    """
    from tvm.s_tir import meta_schedule as ms

    context = ms.TuneContext(mod=w.mod, target=target)
    per_store = ms.feature_extractor.PerStoreFeature().extract_from(context, w.candidates)
    return np.stack([np.concatenate([f.sum(0), f.max(0), f.mean(0)])
                     for f in (x.numpy().astype("float64") for x in per_store)])


def _compiled(w, traces: list[str], target, cache: str) -> np.ndarray:
    """``w``'s compiled-code features (:mod:`tuner.models.compiled_code`), log-scaled, a
    schedule that did not build given each feature's median."""
    from tuner.models.compiled_code import compiled_features, log_counts

    return log_counts(compiled_features(w.name, w.candidates, traces, target, cache))


def repeat_times(split_dir: str, names: set[str]) -> dict[str, dict[str, float]]:
    """``{workload name: {trace JSON: seconds}}`` of a split's valid records."""
    from experiments.ranking_ceiling import measured_times

    times, _ = measured_times(split_dir)
    return {n: t for n, t in times.items() if n in names}


def ordered_traces(split_dir: str) -> dict[str, list[tuple[str, float]]]:
    """Each workload's valid records as ``(trace JSON, seconds)`` in file order: the order
    :func:`metatune.dataset.iter_replayed` (so the accuracy's workloads) lists them."""
    from experiments.ranking_ceiling import valid_records

    out: dict[str, list[tuple[str, float]]] = {}
    for name, trace, seconds in valid_records(split_dir):
        out.setdefault(name, []).append((trace, seconds))
    return out
