"""Accuracy metrics on small hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metatune.metrics import mse, mse_top, pairwise_accuracy, top_k_recall

TARGET = np.array([1.0, 0.5, 0.25, 0.1])


def test_mse_and_mse_of_the_best_quarter():
    pred = np.array([0.5, 0.5, 0.25, 0.1])
    assert mse(pred, TARGET) == pytest.approx(0.25 / 4)
    assert mse_top(pred, TARGET) == pytest.approx(0.25)  # only the best candidate counts


def test_pairwise_accuracy():
    assert pairwise_accuracy(TARGET * 2, TARGET) == 1.0
    assert pairwise_accuracy(-TARGET, TARGET) == 0.0
    # the best is placed right against all three others; the other three pairs are inverted
    assert pairwise_accuracy(np.array([1.0, 0.1, 0.25, 0.5]), TARGET) == pytest.approx(3 / 6)
    assert math.isnan(pairwise_accuracy(np.ones(3), np.ones(3)))


def test_top_k_recall():
    assert top_k_recall(TARGET, TARGET, k=2) == 1.0
    assert top_k_recall(np.array([0.0, 1.0, 0.9, 0.0]), TARGET, k=2) == 0.5
    assert top_k_recall(np.array([0.0, 0.0, 1.0, 0.9]), TARGET, k=2) == 0.0
