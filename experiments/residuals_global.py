# Last ran on commit ee6b9d7
"""The global correction of :mod:`experiments.residuals`: boosted trees trained on the
other workloads' residuals, and the features that go most with the residual."""

from __future__ import annotations

import numpy as np

from experiments.residuals_fit import GLOBAL_FOLDS, GLOBAL_PARAMS, GLOBAL_ROUNDS, _corr, residuals


def weighed_trees(train: list[tuple[np.ndarray, np.ndarray]],
                  weigh: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                  guess=None) -> tuple[object, np.ndarray, np.ndarray]:
    """Boosted trees that guess a model's residual, and the weights of score and guess.

    Args:
        train: Per workload the trees learn from: ``(features n x d, residual n)``.
        weigh: Per workload the trees do not see: ``(features n x d, model's normal
            scores n, measured normal scores n)``; ``z ~ c0 * zp + c1 * guess`` over them.
        guess: ``(booster, features) -> n`` guesses (default: the trees' prediction).

    Returns:
        ``(booster, (c0, c1), the weighing workloads' guesses concatenated)``.
    """
    import xgboost as xgb

    guess = guess or (lambda booster, x: booster.predict(xgb.DMatrix(x)))
    booster = xgb.train(GLOBAL_PARAMS, xgb.DMatrix(np.concatenate([x for x, _ in train]),
                                                   label=np.concatenate([e for _, e in train])),
                        GLOBAL_ROUNDS)
    held = np.concatenate([guess(booster, x) for x, _, _ in weigh])
    coef = np.linalg.lstsq(np.stack([np.concatenate([zp for _, zp, _ in weigh]), held], 1),
                           np.concatenate([z for _, _, z in weigh]), rcond=None)[0]
    return booster, coef, held


def global_corrections(items: list[dict], space: str) -> list[dict]:
    """Each workload's residual guessed by boosted trees trained on the other workloads'.

    The correction a better global model could make from one feature space (its features
    mean the same in every workload): trees trained on measurement a's residuals of the
    other groups' workloads (all but one in :data:`GLOBAL_FOLDS`) guess this workload's,
    the guess is scored against measurement b's residual, and the model's score corrected
    by it is ranked against measurement b (the score's and the guess's weights fitted on
    the workloads left out of the trees, so on guesses as unseen as this one's); both
    directions averaged. Nothing of the workload itself, measured or not, is trained on.

    Args:
        items: Per workload: ``prior``, ``secs`` (both measurements' run times, ``n``
            each), ``features`` (space -> ``n x d``, ``d`` the same for every workload)
            and optionally ``group`` (e.g. its network: the workloads of its group are
            left out with it, so that a network's other convs do not teach its own).
        space: The feature space.

    Returns:
        Per workload (in order), ``{"nn_global_<space>": correlation,
        "pairwise_nn_global_<space>": corrected, "pairwise_base_global_<space>": model}``;
        ``nan`` where fewer than two other workloads are left to learn from.
    """
    import xgboost as xgb

    from metatune.metrics import pairwise_accuracy

    parts = [residuals(it["prior"], *it["secs"]) for it in items]
    x = [it["features"][space] for it in items]
    groups = [it.get("group", i) for i, it in enumerate(items)]
    order = np.random.default_rng(0).permutation(len(items))
    out = []
    for i in range(len(items)):
        others = [j for j in order if groups[j] != groups[i]]
        weigh = others[::GLOBAL_FOLDS]
        train = [j for j in others if j not in weigh]
        if not train:  # one group, or two workloads outside it: nothing to learn from
            out.append({f"{k}_global_{space}": float("nan")
                        for k in ("nn", "pairwise_nn", "pairwise_base")})
            continue
        corr, fixed, base = [], [], []
        for a, b in ((0, 1), (1, 0)):
            # the weights of score and guess: fitted on workloads the trees did not see
            booster, coef, _ = weighed_trees([(x[j], parts[j][2][a]) for j in train],
                                             [(x[j], parts[j][0], parts[j][1][a]) for j in weigh])
            zp, _, e = parts[i]
            guess = booster.predict(xgb.DMatrix(x[i]))
            corr.append(_corr(guess, e[b]))
            y_b = 1.0 / items[i]["secs"][b]
            fixed.append(pairwise_accuracy(coef[0] * zp + max(coef[1], 0.0) * guess, y_b))
            base.append(pairwise_accuracy(zp, y_b))
        out.append({f"nn_global_{space}": float(np.mean(corr)),
                    f"pairwise_nn_global_{space}": float(np.mean(fixed)),
                    f"pairwise_base_global_{space}": float(np.mean(base))})
    return out


def feature_correlations(items: list[dict], space: str, names: list[str], top: int = 8
                         ) -> list[dict]:
    """The features of ``space`` that go most with the model's residual, pooled.

    Each feature standardized within its workload, then correlated over all workloads'
    schedules with the residual (the mean of both measurements') and with the measured
    throughput (normal scores, the mean of both).

    Args:
        items: As :func:`global_corrections`; ``features[space]``'s first ``len(names)``
            columns are the raw features.
        space: The feature space.
        names: The raw features' names.
        top: How many to keep.

    Returns:
        ``top`` dicts ``{"feature", "residual", "throughput"}``, by |residual correlation|.
    """
    from metatune.metrics import standardized

    parts = [residuals(it["prior"], *it["secs"]) for it in items]
    f = np.concatenate([standardized(it["features"][space][:, :len(names)]) for it in items])
    e = np.concatenate([0.5 * (p[2][0] + p[2][1]) for p in parts])
    z = np.concatenate([0.5 * (p[1][0] + p[1][1]) for p in parts])
    rows = [{"feature": n, "residual": _corr(f[:, j], e), "throughput": _corr(f[:, j], z)}
            for j, n in enumerate(names)]
    rows = [r for r in rows if not np.isnan(r["residual"])]
    return sorted(rows, key=lambda r: -abs(r["residual"]))[:top]
