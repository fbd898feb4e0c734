"""Adaptive sampling (Chameleon): measure one representative per cluster of candidates.

The round's best unmeasured candidates are clustered by k-means on their state vectors
(:meth:`tuner.search.rl_space.DecisionSpace.state`), with ``k`` at the knee of the
clustering loss over a range of ``k``, and the best-scored member of each cluster is
measured: fewer, more diverse candidates than the top-k by score.
"""

from __future__ import annotations

import numpy as np


def knee(ks: list[int], losses: list[float]) -> int:
    """The knee of a falling loss curve: the ``k`` farthest below the chord from its first
    to its last point, both axes scaled to ``[0, 1]`` (Kneedle).

    Args:
        ks: Increasing cluster counts.
        losses: The clustering loss at each.

    Returns:
        The ``k`` at the knee (the first ``k`` when the curve is flat or has one point).
    """
    k, y = np.asarray(ks, dtype=float), np.asarray(losses, dtype=float)
    if len(k) < 3 or y[0] - y.min() <= 1e-12 * max(1.0, abs(y[0])):
        return int(ks[0])
    xn = (k - k[0]) / (k[-1] - k[0])
    yn = (y - y.min()) / (y[0] - y.min())
    return int(ks[int(np.argmax((1.0 - yn) - xn))])


def kmeans_knee(x: np.ndarray, k_min: int, k_max: int, seed: int = 0) -> tuple[np.ndarray, int]:
    """k-means with ``k`` at the knee of the loss over ``k_min..k_max``.

    Args:
        x: An ``n x d`` array of points.
        k_min: Fewest clusters.
        k_max: Most clusters (at most ``n``).
        seed: Seed of k-means' initialization.

    Returns:
        ``(labels, k)``: the ``n`` cluster labels at the chosen ``k``, and ``k``.
    """
    from sklearn.cluster import KMeans

    k_max = min(k_max, len(x), len({tuple(row) for row in x}))
    k_min = max(1, min(k_min, k_max))
    fits = {}
    for k in range(k_min, k_max + 1):
        fits[k] = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(x)
    k = knee(list(fits), [f.inertia_ for f in fits.values()])
    return fits[k].labels_, k


def representatives(x: np.ndarray, scores: np.ndarray, q: int, min_clusters: int,
                    seed: int = 0) -> list[int]:
    """The candidates to measure: the best-scored of each cluster, best first.

    Args:
        x: An ``n x d`` array of the candidates' state vectors.
        scores: Their ``n`` predicted scores.
        q: The batch size: most clusters (and candidates).
        min_clusters: Fewest clusters (at most ``q``).
        seed: Seed of k-means.

    Returns:
        At most ``q`` distinct indices into ``x``, by descending score.
    """
    n = len(x)
    if n <= min(min_clusters, q):
        return sorted(range(n), key=lambda i: -scores[i])
    labels, _ = kmeans_knee(x, min(min_clusters, q), q, seed)
    best: dict[int, int] = {}
    for i, label in enumerate(labels.tolist()):
        if label not in best or scores[i] > scores[best[label]]:
            best[label] = i
    return sorted(best.values(), key=lambda i: -scores[i])
