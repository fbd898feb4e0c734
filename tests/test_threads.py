"""PyTorch threads while the tuner's learned parts run: one, the caller's count restored,
the same numbers as on more threads."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tvm.s_tir import meta_schedule as ms

from metatune.maml import AdaptConfig
from metatune.threads import TUNER_THREADS, torch_threads
from tuner.models.cost_model import MetaTuneCostModel
from tuner.models.trained import load_model
from tuner.search import bo_select


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_the_block_runs_on_the_given_threads_and_the_count_comes_back(two_threads):
    with torch_threads():
        assert torch.get_num_threads() == TUNER_THREADS == 1
        with torch_threads(1):  # nested: nothing to change
            assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("restored even so")
    assert torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="at least one thread"), torch_threads(0):
        pass


def _model() -> MetaTuneCostModel:
    torch.manual_seed(0)
    return MetaTuneCostModel(model=load_model(None, from_scratch=True, hidden=16,
                                              adapt=AdaptConfig(steps=5, lr=0.05)))


def test_the_cost_model_and_the_gp_run_on_one_thread(context_and_candidates, two_threads,
                                                     monkeypatch):
    ctx, cands = context_and_candidates
    seen = []
    real_fit = bo_select.fit_gp
    monkeypatch.setattr(bo_select, "fit_gp",
                        lambda *a, **k: seen.append(("gp", torch.get_num_threads()))
                        or real_fit(*a, **k))
    model = _model()
    real_adapt = model.inner.adapt
    monkeypatch.setattr(model.inner, "adapt", lambda *a, **k: seen.append(
        ("adapt", torch.get_num_threads())) or real_adapt(*a, **k))
    real_embed = model.net.embed
    monkeypatch.setattr(model.net, "embed", lambda *a: seen.append(
        ("embed", torch.get_num_threads())) or real_embed(*a))
    model.update(ctx, cands, [ms.runner.RunnerResult([1e-3 * (i + 1)], None)
                              for i in range(len(cands))])
    model.predict(ctx, cands)
    rng = np.random.default_rng(0)
    bo_select.select_batch(rng.random((20, 4)), rng.random(20), rng.random((8, 4)),
                           rng.random(8), rng.random(8), 4, device=torch.device("cpu"))
    assert {kind for kind, _ in seen} == {"gp", "adapt", "embed"}
    assert all(n == 1 for _, n in seen), seen
    assert torch.get_num_threads() == 2  # the caller's count, back


def test_one_thread_gives_the_same_scores_as_two(context_and_candidates, two_threads,
                                                 monkeypatch):
    ctx, cands = context_and_candidates
    results = [ms.runner.RunnerResult([1e-3 * (1 + (i * 7) % 5)], None)
               for i in range(len(cands))]
    out = {}
    for n in (1, 2):
        monkeypatch.setattr("metatune.threads.TUNER_THREADS", n)
        model = _model()
        model.update(ctx, cands, results)
        out[n] = model.predict(ctx, cands)
    np.testing.assert_array_equal(out[1], out[2])
