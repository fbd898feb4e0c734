"""MAML numerics and the GCN model's contract (learn2learn-style checks)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from metatune.graph import NODE_FEATURES, encode
from metatune.maml import adapt, head_params, predict
from metatune.model import MetaTuneNet
from metatune.workloads import Workload


def _head(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


def _task(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(10, 4, generator=g)
    return x[:5], x[:5].sum(1), x[5:], x[5:].sum(1)


def test_meta_gradient_reaches_initial_weights():
    head = _head()
    xs, ys, xq, yq = _task(1)
    fast = adapt(head, head_params(head), xs, ys, steps=2, lr=0.1)
    loss = nn.functional.mse_loss(predict(head, fast, xq), yq)
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())
    assert all(p.grad is not None for p in head.parameters())


def test_first_order_drops_only_second_order_terms():
    head = _head()
    xs, ys, xq, yq = _task(2)
    grads = {}
    for first_order in (False, True):
        head.zero_grad()
        fast = adapt(head, head_params(head), xs, ys, steps=1, lr=0.05, first_order=first_order)
        nn.functional.mse_loss(predict(head, fast, xq), yq).backward()
        grads[first_order] = [p.grad.clone() for p in head.parameters()]
    # with zero inner steps the two coincide exactly; with one step they differ but stay close
    assert any(not torch.allclose(a, b) for a, b in zip(grads[False], grads[True]))
    for a, b in zip(grads[False], grads[True]):
        assert torch.allclose(a, b, rtol=0.5, atol=0.5)
    head.zero_grad()
    fast = adapt(head, head_params(head), xs, ys, steps=0, lr=0.05)
    nn.functional.mse_loss(predict(head, fast, xq), yq).backward()
    plain = [p.grad.clone() for p in head.parameters()]
    head.zero_grad()
    nn.functional.mse_loss(head(xq).squeeze(-1), yq).backward()
    assert all(torch.allclose(a, p.grad) for a, p in zip(plain, head.parameters()))


def test_adaptation_lowers_support_loss_and_leaves_head_untouched():
    head = _head()
    before = [p.detach().clone() for p in head.parameters()]
    xs, ys, _, _ = _task(3)
    loss0 = nn.functional.mse_loss(head(xs).squeeze(-1), ys).item()
    fast = adapt(head, head_params(head), xs, ys, steps=20, lr=0.05)
    loss1 = nn.functional.mse_loss(predict(head, fast, xs), ys).item()
    assert loss1 < loss0
    assert all(torch.equal(a, p) for a, p in zip(before, head.parameters()))


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
    assert torch.allclose(predict(net.head, head_params(net.head), emb), out)


def test_second_order_equals_first_order_through_the_inner_hessian():
    """For one inner step: g_second = (I - lr * H_support) g_first, exactly."""
    torch.manual_seed(0)
    head = nn.Linear(4, 1).double()
    xs, ys, xq, yq = (t.double() for t in _task(4))
    lr = 0.1
    names = [n for n, _ in head.named_parameters()]
    shapes = [p.shape for p in head.parameters()]

    def unflat(v):
        out, i = {}, 0
        for n, s in zip(names, shapes):
            out[n] = v[i:i + s.numel()].view(s)
            i += s.numel()
        return out

    flat = torch.cat([p.detach().flatten() for p in head.parameters()])
    support = lambda v: nn.functional.mse_loss(predict(head, unflat(v), xs), ys)  # noqa: E731
    hess = torch.autograd.functional.hessian(support, flat)
    grads = {}
    for first_order in (False, True):
        head.zero_grad()
        fast = adapt(head, head_params(head), xs, ys, steps=1, lr=lr, first_order=first_order)
        nn.functional.mse_loss(predict(head, fast, xq), yq).backward()
        grads[first_order] = torch.cat([p.grad.flatten() for p in head.parameters()])
    expected = (torch.eye(flat.numel(), dtype=flat.dtype) - lr * hess) @ grads[True]
    assert torch.allclose(grads[False], expected, atol=1e-10)
