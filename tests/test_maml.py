"""Adaptation numerics (learn2learn-style checks), the loss and scope variants, Meta-SGD,
and the GCN model's contract."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from metatune.errors import ConfigError
from metatune.graph import NODE_FEATURES, encode
from metatune.maml import AdaptConfig, InnerLoop, adapted_names, pairwise_rank_loss
from metatune.model import MetaTuneNet
from metatune.workloads import Workload


class _Net(nn.Module):
    """A stand-in with a ``head`` (what the head-only inner loop adapts)."""

    def __init__(self, dtype=torch.float32) -> None:
        super().__init__()
        self.head = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).to(dtype)


def _net(seed: int = 0, dtype=torch.float32) -> _Net:
    torch.manual_seed(seed)
    return _Net(dtype)


def _task(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(10, 4, generator=g)
    return x[:5], x[:5].sum(1), x[5:], x[5:].sum(1)


def _inner(net, **cfg) -> InnerLoop:
    return InnerLoop(net, AdaptConfig(**cfg))


def _query_loss(inner, net, fast, xq, yq):
    return nn.functional.mse_loss(inner.predict(net, fast, xq), yq)


def test_meta_gradient_reaches_initial_weights():
    net = _net()
    inner = _inner(net, steps=2, lr=0.1)
    xs, ys, xq, yq = _task(1)
    fast = inner.adapt(net, inner.initial(net), xs, ys)
    _query_loss(inner, net, fast, xq, yq).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())


def test_first_order_drops_only_second_order_terms():
    net = _net()
    inner = _inner(net, steps=1, lr=0.05)
    xs, ys, xq, yq = _task(2)
    grads = {}
    for first_order in (False, True):
        net.zero_grad()
        fast = inner.adapt(net, inner.initial(net), xs, ys, first_order=first_order)
        _query_loss(inner, net, fast, xq, yq).backward()
        grads[first_order] = [p.grad.clone() for p in net.parameters()]
    assert any(not torch.allclose(a, b) for a, b in zip(grads[False], grads[True], strict=False))
    for a, b in zip(grads[False], grads[True], strict=False):
        assert torch.allclose(a, b, rtol=0.5, atol=0.5)
    net.zero_grad()  # with zero inner steps the query gradient is the plain one
    fast = inner.adapt(net, inner.initial(net), xs, ys, steps=0)
    _query_loss(inner, net, fast, xq, yq).backward()
    plain = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    nn.functional.mse_loss(net.head(xq).squeeze(-1), yq).backward()
    assert all(torch.allclose(a, p.grad) for a, p in zip(plain, net.parameters(), strict=False))


@pytest.mark.parametrize("loss", ["mse", "mse+rank"])
def test_adaptation_lowers_support_loss_and_leaves_the_net_untouched(loss):
    from metatune.maml import task_loss

    net = _net()
    inner = _inner(net, steps=20, lr=0.05, loss=loss)
    before = [p.detach().clone() for p in net.parameters()]
    xs, ys, _, _ = _task(3)
    start = inner.initial(net, detach=True)
    loss0 = task_loss(inner.predict(net, start, xs), ys, loss).item()
    fast = inner.adapt(net, start, xs, ys, first_order=True)
    assert task_loss(inner.predict(net, fast, xs), ys, loss).item() < loss0
    assert all(torch.equal(a, p) for a, p in zip(before, net.parameters(), strict=False))


def test_rank_loss_counts_only_ordered_pairs():
    target = torch.tensor([1.0, 0.5, 0.5])
    right = pairwise_rank_loss(torch.tensor([3.0, 1.0, 0.0]), target)
    wrong = pairwise_rank_loss(torch.tensor([0.0, 1.0, 3.0]), target)
    assert right < wrong
    assert pairwise_rank_loss(torch.zeros(3), torch.ones(3)) == 0.0  # all tie: no pairs


def test_scopes_and_bad_settings():
    net = MetaTuneNet(NODE_FEATURES, hidden=8, head_hidden=8)
    head, last, every = (adapted_names(net, s) for s in ("head", "last_gcn", "all"))
    assert set(head) < set(last) < set(every)
    assert all(n.startswith(("head.", "convs.1.")) for n in last)
    with pytest.raises(ConfigError, match="scope"):
        AdaptConfig(scope="gcn")
    with pytest.raises(ConfigError, match="loss"):
        AdaptConfig(loss="hinge")


def test_override_changes_the_steps_and_step_size_only():
    net = MetaTuneNet(NODE_FEATURES, hidden=8, head_hidden=8)
    inner = InnerLoop(net, AdaptConfig(scope="last_gcn"))
    inner.override(steps=20, lr=0.05)
    assert (inner.cfg.steps, inner.cfg.lr, inner.cfg.scope) == (20, 0.05, "last_gcn")
    inner.override(steps=None, lr=None)  # None keeps
    assert (inner.cfg.steps, inner.names) == (20, adapted_names(net, "last_gcn"))


def test_retired_adaptation_settings_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match="loss 'list' is retired.*da885ad"):
        AdaptConfig(loss="list")
    with pytest.raises(TypeError):  # no such setting any more (the config names it retired)
        AdaptConfig(meta_sgd=True)


@pytest.mark.parametrize("mode", ["plain", "super"])
def test_model_scores_a_batch_of_graphs(mode):
    from torch_geometric.data import Batch

    graphs = [encode(Workload("conv2d", c, 14, 32, 3, 1).prim_func(), mode) for c in (16, 32, 64)]
    batch = Batch.from_data_list(graphs)
    net = MetaTuneNet(NODE_FEATURES, hidden=16, head_hidden=16)
    out = net(batch.x, batch.edge_index, batch.batch)
    assert out.shape == (3,) and out.dtype == torch.float32 and torch.isfinite(out).all()
    emb = net.embed(batch.x, batch.edge_index, batch.batch)
    assert emb.shape == (3, 32)
    head_only, whole = _inner(net), _inner(net, scope="all")
    assert torch.allclose(head_only.predict(net, head_only.initial(net), emb), out)
    assert torch.allclose(whole.predict(net, whole.initial(net), batch), out)
    # adapting the last GCN layer changes the embedding itself
    y = torch.tensor([0.2, 0.5, 1.0])
    last = _inner(net, scope="last_gcn", steps=3, lr=0.1)
    fast = last.adapt(net, last.initial(net, detach=True), batch, y, first_order=True)
    assert not torch.equal(fast["convs.1.lin.weight"], net.convs[1].lin.weight)


def test_second_order_equals_first_order_through_the_inner_hessian():
    """For one inner step: g_second = (I - lr * H_support) g_first, exactly."""
    net = _net(dtype=torch.float64)
    net.head = nn.Linear(4, 1).double()
    lr = 0.1
    inner = _inner(net, steps=1, lr=lr, loss="mse")  # the Hessian below is MSE's
    xs, ys, xq, yq = (t.double() for t in _task(4))
    names = [n for n, _ in net.named_parameters()]
    shapes = [p.shape for p in net.parameters()]

    def unflat(v):
        out, i = {}, 0
        for n, s in zip(names, shapes, strict=False):
            out[n] = v[i:i + s.numel()].view(s)
            i += s.numel()
        return out

    flat = torch.cat([p.detach().flatten() for p in net.parameters()])
    support = lambda v: nn.functional.mse_loss(inner.predict(net, unflat(v), xs), ys)  # noqa: E731
    hess = torch.autograd.functional.hessian(support, flat)
    grads = {}
    for first_order in (False, True):
        net.zero_grad()
        fast = inner.adapt(net, inner.initial(net), xs, ys, first_order=first_order)
        _query_loss(inner, net, fast, xq, yq).backward()
        grads[first_order] = torch.cat([p.grad.flatten() for p in net.parameters()])
    expected = (torch.eye(flat.numel(), dtype=flat.dtype) - lr * hess) @ grads[True]
    assert torch.allclose(grads[False], expected, atol=1e-10)


