"""The rejection-sampling loop the workload generators share (``metatune.sampling``), and
that both generators draw, for the same seed, what they drew before it was shared."""

from __future__ import annotations

import hashlib
import itertools
import random

import pytest

from metatune.sampling import rejection_sample
from metatune.workloads import KINDS, sample_workload, training_workloads
from metatune.workloads_transformer import (
    TRANSFORMER_KINDS,
    sample_sequence_workload,
    transformer_workloads,
)


def test_the_first_accepted_draw_after_as_many_draws():
    counter = itertools.count()
    assert rejection_sample(lambda: next(counter), lambda v: v % 7 == 3, "none") == 3
    assert next(counter) == 4  # no draw after the accepted one


def test_it_gives_up_after_tries_draws_with_the_failure():
    calls = []
    with pytest.raises(RuntimeError, match="could not draw a thing"):
        rejection_sample(lambda: calls.append(1), lambda v: False, "could not draw a thing",
                         tries=5)
    assert len(calls) == 5


def _digest(lines) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def _draws(sample, kinds) -> str:
    """20 draws of every kind for seeds 0-2, and the generator's next number after them
    (so the same number of draws was made)."""
    out = []
    for seed, kind in itertools.product(range(3), kinds):
        rng = random.Random(seed)
        out += [sample(kind, rng).name for _ in range(20)]
        out.append(repr(rng.random()))
    return _digest(out)


# The digests below were taken with the generators' own loops, before the loop was shared
# (commit 43179c0): the same seed must draw the same workloads, or every dataset's
# workloads change (and GENERATOR_VERSION with them).
def test_sample_workload_draws_what_it_drew_before():
    assert _draws(sample_workload, KINDS) == "8abd0bb94f94f071"
    assert _digest(w.name for w in training_workloads(seed=0)) == "a89c772b5a620a44"


def test_sample_sequence_workload_draws_what_it_drew_before():
    assert _draws(sample_sequence_workload, TRANSFORMER_KINDS) == "a954f0fd29dfee11"
    assert _digest(w.name for w in transformer_workloads(8, seed=0)) == "9e3a68167f78a6d3"
