"""Cost-model accuracy metrics (paper section 7, plus ranking quality).

All take predictions and targets of one workload, targets being relative throughput
(higher is better, 1.0 for the best measured candidate).
"""

from __future__ import annotations

import numpy as np


def mse(pred: np.ndarray, target: np.ndarray) -> float:
    """Mean squared error over all candidates."""
    pred, target = np.asarray(pred, float), np.asarray(target, float)
    return float(np.mean((pred - target) ** 2))


def mse_top(pred: np.ndarray, target: np.ndarray, fraction: float = 0.25) -> float:
    """MSE(D): the MSE over the candidates whose measured target is in the top ``fraction``."""
    pred, target = np.asarray(pred, float), np.asarray(target, float)
    k = max(1, int(np.ceil(len(target) * fraction)))
    top = np.argsort(-target, kind="stable")[:k]
    return float(np.mean((pred[top] - target[top]) ** 2))


def pairwise_accuracy(pred: np.ndarray, target: np.ndarray) -> float:
    """Fraction of candidate pairs with different targets that the predictions order right."""
    pred, target = np.asarray(pred, float), np.asarray(target, float)
    dp = pred[:, None] - pred[None, :]
    dt = target[:, None] - target[None, :]
    mask = dt > 0
    if not mask.any():
        return float("nan")
    return float(np.mean(dp[mask] > 0))


def top_k_recall(pred: np.ndarray, target: np.ndarray, k: int = 5) -> float:
    """Fraction of the truly best ``k`` candidates found among the predicted best ``k``."""
    pred, target = np.asarray(pred, float), np.asarray(target, float)
    k = min(k, len(target))
    true_top = set(np.argsort(-target, kind="stable")[:k].tolist())
    pred_top = set(np.argsort(-pred, kind="stable")[:k].tolist())
    return len(true_top & pred_top) / k


def standardized(x: np.ndarray) -> np.ndarray:
    """Columns of ``x`` (``n x d``) to zero mean and unit variance (constant ones stay 0):
    features of one workload's candidates as the accuracy benchmark's learners read them."""
    return (x - x.mean(0)) / np.maximum(x.std(0), 1e-9)
