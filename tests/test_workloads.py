"""Workload generator: reproducible, in range, and every kind builds a PrimFunc."""

from __future__ import annotations

import random

import pytest

from metatune.workloads import KINDS, MAX_FLOPS, MIN_FLOPS, sample_workload, training_workloads


def test_training_set_is_reproducible_and_covers_all_kinds():
    a, b = training_workloads(per_kind=6, seed=0), training_workloads(per_kind=6, seed=0)
    assert [w.name for w in a] == [w.name for w in b]
    assert len({w.name for w in a}) == 42
    assert {w.kind for w in a} == set(KINDS)
    assert all(MIN_FLOPS <= w.flops() <= MAX_FLOPS for w in a)
    assert [w.name for w in training_workloads(per_kind=6, seed=1)] != [w.name for w in a]


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_builds_a_prim_func(kind):
    wl = sample_workload(kind, random.Random(3))
    func = wl.prim_func()
    assert func.attrs["global_symbol"] == wl.name
    assert len(func.params) == 3  # input, weight, output
    assert wl.kernel in (1, 3, 5) and wl.stride in (1, 2)


def test_unknown_kind():
    with pytest.raises(ValueError, match="conv2d"):
        sample_workload("conv3d", random.Random(0))
