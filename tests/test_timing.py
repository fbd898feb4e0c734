"""Side-by-side timing: alternating rounds, windows of a minimum length."""

import numpy as np
import pytest
import torch

from tuner.engine.timing import interleaved, torch_timer


def test_interleaved_alternates_the_order_and_spreads_the_windows():
    calls = []

    def fake(name, ms):
        def windows(count, min_window_ms):
            calls.append((name, count, min_window_ms))
            return [ms] * count
        return windows

    out = interleaved({"a": fake("a", 1.0), "b": fake("b", 2.0), "c": fake("c", 3.0)},
                      windows=10, min_window_ms=50, rounds=4, settle_s=0)
    assert [c[0] for c in calls] == list("abc" "cba" "abc" "cba")
    assert {c[1] for c in calls} == {3} and {c[2] for c in calls} == {50}  # ceil(10 / 4)
    assert out["a"].median_ms == 1.0 and len(out["b"].runs_ms) == 12
    assert out["c"].median_ms == 3.0


def test_interleaved_refuses_zero_rounds():
    with pytest.raises(ValueError, match="at least 1"):
        interleaved({"a": lambda n, ms: [1.0] * n}, windows=1, min_window_ms=1, rounds=0)


def test_torch_timer_windows_last_at_least_their_minimum():
    calls = []

    class Counting(torch.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 2

    before = torch.get_num_threads()
    timer = torch_timer(Counting().eval(), np.ones((4, 4), np.float32), num_threads=1,
                        warmup=2)
    assert len(calls) == 2  # warmed up on creation
    per_call = timer(3, 5.0)
    assert len(per_call) == 3 and all(ms > 0 for ms in per_call)
    # each window ran the model back to back for >= 5 ms, so its mean covers many calls
    assert len(calls) - 2 >= 3 and min(per_call) <= 5.0
    assert torch.get_num_threads() == 1
    torch.set_num_threads(before)
