# Last ran on commit ee6b9d7
"""The decomposition of one workload's ranking errors (:mod:`experiments.residuals`):
normal scores, the model's residual, and the task-local learners that guess it from the
task's other schedules (nearest neighbours, ridge, boosted trees)."""

from __future__ import annotations

import numpy as np
from scipy import stats

RIDGE_PENALTY = 100.0  #: the ridge penalty (normal scores, standardized features; not tuned)
TREE_FOLDS = 5  #: boosted trees predict each fold from the other folds
TREE_PARAMS = {"max_depth": 3, "eta": 0.1, "subsample": 0.8, "nthread": 1, "seed": 0,
               "objective": "reg:squarederror", "verbosity": 0}  #: not tuned
TREE_ROUNDS = 60
GLOBAL_ROUNDS = 100  #: boosted trees of the global correction (not tuned)
GLOBAL_PARAMS = {**TREE_PARAMS, "max_depth": 4, "nthread": 2}
GLOBAL_FOLDS = 5  #: one in five of the other workloads weighs the guess, the rest train it
SPACES = {"knobs": "the tuner's knob space", "embed": "the model's graph embedding",
          "stores": "MetaSchedule's per-store features",
          "compiled": "the compiled code's counts"}  #: feature spaces, as the page names them
GLOBAL_SPACES = ("embed", "stores", "compiled")  #: a feature means the same in every workload


def normal_scores(x: np.ndarray) -> np.ndarray:
    """Ranks of ``x`` (``n``; ties averaged) mapped to standard normal quantiles (``n``)."""
    return stats.norm.ppf((stats.rankdata(x) - 0.5) / len(x))


def neighbour_means(features: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """Each row's mean of ``values`` over its ``m`` nearest other rows.

    Args:
        features: ``n x d`` standardized features.
        values: ``n`` values to average.
        m: Neighbours per row (Euclidean; the row itself excluded).

    Returns:
        An ``n`` array.
    """
    d = ((features[:, None, :] - features[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    nearest = np.argsort(d, axis=1, kind="stable")[:, :m]
    return values[nearest].mean(1)


def ridge_loo(features: np.ndarray, values: np.ndarray, lam: float) -> np.ndarray:
    """Each row's ridge prediction of ``values`` from the other rows (leave-one-out).

    Args:
        features: ``n x d`` standardized features.
        values: ``n`` values (centred by the fit's intercept).
        lam: The ridge penalty.

    Returns:
        An ``n`` array: row ``i`` predicted by the ridge fitted without it.
    """
    x = np.hstack([features, np.ones((len(features), 1))])
    penalty = lam * np.eye(x.shape[1])
    penalty[-1, -1] = 0.0  # the intercept is not shrunk
    hat = x @ np.linalg.solve(x.T @ x + penalty, x.T)
    fitted = hat @ values
    return values - (values - fitted) / np.maximum(1.0 - np.diag(hat), 1e-9)


def trees_cross_fit(features: np.ndarray, values: np.ndarray,
                    folds: int = TREE_FOLDS) -> np.ndarray:
    """Each row's boosted-trees prediction of ``values`` from the other folds' rows.

    Args:
        features: ``n x d`` features.
        values: ``n`` values.
        folds: Folds (rows dealt to them in a fixed random order).

    Returns:
        An ``n`` array: row ``i`` predicted by XGBoost trained without its fold.
    """
    import xgboost as xgb

    order = np.random.default_rng(0).permutation(len(values))
    out = np.zeros(len(values))
    for f in range(folds):
        test = order[f::folds]
        train = np.setdiff1d(order, test)
        booster = xgb.train(TREE_PARAMS, xgb.DMatrix(features[train], label=values[train]),
                            TREE_ROUNDS)
        out[test] = booster.predict(xgb.DMatrix(features[test]))
    return out


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation (``nan`` when either is constant)."""
    if np.std(a) < 1e-12 or np.std(b) < 1e-12:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def residuals(prior: np.ndarray, secs1: np.ndarray, secs2: np.ndarray
              ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The model's and both measurements' normal scores, and each measurement's residual.

    Args:
        prior: ``n`` model scores (higher: faster).
        secs1, secs2: ``n`` run times of the same candidates, measured twice.

    Returns:
        ``(zp, (z1, z2), (e1, e2))``, each ``n``: ``e = z - corr(z, zp) * zp``.
    """
    zp = normal_scores(prior)
    z = (normal_scores(1.0 / secs1), normal_scores(1.0 / secs2))
    e = (z[0] - _corr(z[0], zp) * zp, z[1] - _corr(z[1], zp) * zp)
    return zp, z, e


def decompose(prior: np.ndarray, secs1: np.ndarray, secs2: np.ndarray,
              spaces: dict[str, np.ndarray], m: int) -> dict | None:
    """One workload's decomposition (module docstring).

    Args:
        prior: ``n`` model scores before any measurement of the task (higher: faster).
        secs1, secs2: ``n`` run times of the same candidates, measured twice.
        spaces: Name -> ``n x d`` standardized features the learners see (names of
            :data:`SPACES`, or any).
        m: Neighbours per candidate.

    Returns:
        The workload's figures (pairwise, Spearman, residual shares, the learners'
        correlations with the residual and the corrected ranking's pairwise accuracy, each
        the mean of both directions: fitted on one measurement, scored on the other), or
        ``None`` when the model scores every candidate alike or a measurement ranks
        nothing (nothing to decompose).
    """
    from metatune.metrics import pairwise_accuracy

    y = (1.0 / secs1, 1.0 / secs2)
    if min(np.std(prior), np.std(y[0]), np.std(y[1])) < 1e-12:
        return None
    zp, z, e = residuals(prior, secs1, secs2)
    r12 = float(stats.spearmanr(y[0], y[1])[0])
    r_model = 0.5 * sum(float(stats.spearmanr(prior, v)[0]) for v in y)
    upper = np.triu_indices(len(prior), 1)
    row = {"n": len(prior),
           "tied_pairs": float(np.mean((prior[:, None] == prior[None, :])[upper])),
           "pairwise_noise": pairwise_accuracy(y[1], y[0]),
           "pairwise_model": 0.5 * sum(pairwise_accuracy(prior, v) for v in y),
           "spearman_noise": r12, "spearman_model": r_model,
           "spearman_model_truth": r_model / np.sqrt(r12) if r12 > 0 else float("nan"),
           "residual_systematic": _corr(e[0], e[1]),
           "residual_share": float(np.mean([ei.var() / zi.var()
                                             for ei, zi in zip(e, z, strict=False)]))}
    learners = {}
    for name, x in spaces.items():
        learners[name] = lambda v, x=x: neighbour_means(x, v, m)
        learners[f"ridge_{name}"] = lambda v, x=x: ridge_loo(x, v, RIDGE_PENALTY)
        learners[f"trees_{name}"] = lambda v, x=x: trees_cross_fit(x, v)
    for name, learn in learners.items():
        corr, fixed, base = [], [], []
        for a, b in ((0, 1), (1, 0)):  # fitted on measurement a, scored on measurement b
            guess = learn(e[a])  # each candidate's residual predicted from the others'
            corr.append(_corr(guess, e[b]))
            # z_a regressed on the model's score and the learner's guess (measurement a
            # only: a candidate's noise is in its own z_a, not in the others' guess)
            coef = np.linalg.lstsq(np.stack([zp, guess], 1), z[a], rcond=None)[0]
            corrected = coef[0] * zp + max(coef[1], 0.0) * guess
            fixed.append(pairwise_accuracy(corrected, y[b]))
            base.append(pairwise_accuracy(zp, y[b]))
        row[f"nn_{name}"] = float(np.mean(corr))
        row[f"pairwise_nn_{name}"] = float(np.mean(fixed))
        row[f"pairwise_base_{name}"] = float(np.mean(base))
    return row


def summarize(rows: list[dict]) -> dict:
    """Each figure's mean over the workloads (``nan`` ones left out)."""
    keys = [k for k in rows[0] if k not in ("workload", "n")]
    return {k: float(np.nanmean([r[k] for r in rows])) for k in keys}
