# Last ran on commit f1232c5
"""The figures of :mod:`experiments.pool_headroom`: each choice of a measured pool, its
best over the pool's best, the rankings' accuracy, and their summary per round."""

from __future__ import annotations

import math

import numpy as np

from bench.common import geomean, median

BATCH = 16  #: candidates a round measures in tuning (``trials_per_round``)
RETIMED = 5  #: the pool's best schedules measured a second time


def expected_best_of_random(seconds: list[float], n: int) -> float:
    """The expected best (lowest) of ``n`` of ``seconds`` drawn without replacement.

    Sorted ascending, the ``i``-th (0-based) is the best of a draw with probability
    ``C(N - 1 - i, n - 1) / C(N, n)``.
    """
    s = sorted(seconds)
    total, n = len(s), min(n, len(s))
    return sum(math.comb(total - 1 - i, n - 1) * v for i, v in enumerate(s)) / math.comb(total, n)


def unadapted(rows: list[dict], full_round: int) -> list[float] | None:
    """The unadapted model's scores of the rows: ``prior0``, or in round 1 (nothing to
    adapt on yet) ``prior``; ``None`` when not recorded."""
    if all(r.get("prior0") is not None for r in rows):
        return [r["prior0"] for r in rows]
    return [r["prior"] for r in rows] if full_round == 1 else None


def variant_names(rows: list[dict]) -> list[str]:
    """The adaptation variants the rows were scored by (none: ``[]``)."""
    return list(rows[0].get("variants", {})) if rows else []


def scorings(rows: list[dict], full_round: int) -> dict[str, list[float]]:
    """Each ranking of the rows, by key suffix: ``""`` the model adapted online, ``"0"``
    unadapted (when recorded), ``"_NAME"`` each variant."""
    out = {"": [r["prior"] for r in rows]}
    zero = unadapted(rows, full_round)
    if zero is not None:
        out["0"] = zero
    for name in variant_names(rows):
        out["_" + name] = [r["variants"][name] for r in rows]
    return out


def choices(rows: list[dict], full_round: int) -> dict[str, list[int]]:
    """The rows each choice of ``BATCH`` takes: BO's picks, and the top by each ranking of
    :func:`scorings` (``top``: the model adapted to the rounds before, ``top0``: unadapted,
    ``top_NAME``: a variant)."""
    out = {"bo": [i for i, r in enumerate(rows) if r["picked"]]}
    for key, scores in scorings(rows, full_round).items():
        out["top" + key] = sorted(range(len(rows)), key=lambda i: -scores[i])[:BATCH]
    return out


def choice_bests(rows: list[dict], full_round: int) -> dict[str, int]:
    """Each choice's best row by the first timing (a failed row only when all failed)."""
    return {name: min(idx, key=lambda i: rows[i]["seconds"] or math.inf)
            for name, idx in choices(rows, full_round).items()}


def headroom(run: dict) -> dict | None:
    """One run's figures: each choice's best over the pool's best (latency, on the second
    measurement), the expected best of a random choice over the pool's best (first
    measurement), the ranking of the pool by the model adapted to the rounds before and
    by the unadapted one, and the pool's best over the task's best before the round;
    ``None`` without a valid pool."""
    from metatune.metrics import pairwise_accuracy, top_k_recall

    rows = run["rows"]
    ok = [i for i, r in enumerate(rows) if r["seconds"] is not None]
    again = [r for r in rows if r.get("seconds_again")]
    if len(ok) < BATCH or not again:
        return None
    pool_best = min(r["seconds_again"] for r in again)
    out = {}
    for name, best in choice_bests(rows, run["round"]).items():
        secs = rows[best].get("seconds_again") or rows[best]["seconds"]
        out[name] = secs / pool_best if secs else None
    first = [rows[i]["seconds"] for i in ok]
    out["random"] = expected_best_of_random(first, BATCH) / min(first)
    tput = 1.0 / np.array(first)
    for key, scores in scorings(rows, run["round"]).items():
        prior = np.array([scores[i] for i in ok])
        out["pairwise" + key] = pairwise_accuracy(prior, tput)
        out["top5" + key] = top_k_recall(prior, tput)
        order = np.argsort(-prior, kind="stable")
        out["pool_best_rank" + key] = int(np.where(order == int(np.argmax(tput)))[0][0]) + 1
    hist = run.get("history_best_s")
    out["pool_over_history"] = pool_best / hist if hist else None
    bo_best = out["bo"] * pool_best if out["bo"] else None
    out["bo_over_history"] = min(bo_best, hist) / hist if hist and bo_best else None
    return out


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def summarize(runs: list[dict]) -> dict:
    """Per round: geometric means of the ratios over runs, means of the ranking figures,
    medians of the ranks and pool sizes."""
    out = {}
    for rnd in sorted({r["round"] for r in runs}):
        rs = [h for r in runs if r["round"] == rnd and (h := headroom(r)) is not None]
        out[str(rnd)] = {
            "runs": len(rs),
            **{f"{k}_over_pool": geomean([h.get(k) for h in rs])
               for k in ("bo", "top", "top0", "random")},
            "bo_is_pool_best": sum(h["bo"] is not None and h["bo"] <= 1.0 + 1e-9 for h in rs),
            **{k: _mean([h.get(k) for h in rs])
               for k in ("pairwise", "pairwise0", "top5", "top50")},
            "median_pool_best_rank": median([h["pool_best_rank"] for h in rs]),
            "median_pool_best_rank0": median([h.get("pool_best_rank0") for h in rs]),
            "pool_over_history": geomean([h["pool_over_history"] for h in rs]),
            "bo_over_history": geomean([h["bo_over_history"] for h in rs]),
            "median_pool": median([r["pool"] for r in runs if r["round"] == rnd]),
        }
        names = dict.fromkeys(n for r in runs if r["round"] == rnd
                              for n in variant_names(r["rows"]))
        if names:
            out[str(rnd)]["variants"] = {n: _variant_summary(rs, "_" + n) for n in names}
    return out


def _variant_summary(rs: list[dict], key: str) -> dict:
    """One ranking's figures over the runs' :func:`headroom` dicts ``rs``: means of
    pairwise accuracy and top-5 recall, the mean gain in pairwise accuracy over the
    unadapted model (the rise with the task's measurements) and the runs where it beats
    the model adapted online, the median rank of the pool's best, the best of its top
    ``BATCH`` over the pool's best (geometric mean)."""
    have = [h for h in rs if h.get("pairwise" + key) is not None]
    return {"runs": len(have),
            "pairwise": _mean([h["pairwise" + key] for h in have]),
            "top5": _mean([h["top5" + key] for h in have]),
            "rise": _mean([h["pairwise" + key] - h["pairwise0"] for h in have
                           if h.get("pairwise0") is not None]),
            "above_default": sum(h["pairwise" + key] > h["pairwise"] for h in have),
            "median_pool_best_rank": median([h["pool_best_rank" + key] for h in have]),
            "top_over_pool": geomean([h.get("top" + key) for h in have])}
