"""Tiny PyTorch models for fast end-to-end tests (loaded with ``--model tests.models:NAME``)."""

from __future__ import annotations

import torch
from torch import nn


def tiny_convnet() -> nn.Module:
    """Conv(8->16, 3x3) + BN + ReLU on a 8x16x16 input: one small conv task after folding."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
    with torch.no_grad():  # non-trivial batch-norm statistics, so folding is checked
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 2.0)
    return model.eval()


def not_a_module() -> int:
    """A factory that returns the wrong type (for error tests)."""
    return 42


def tiny_classifier() -> nn.Module:
    """Conv + ReLU, max-pool, flatten, linear on a 4x8x8 input: conv, pool and dense tasks."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 4 * 4, 10)).eval()


def raises() -> nn.Module:
    """A factory that fails (for error tests)."""
    raise RuntimeError("weights not found")


def unseeded_linear() -> nn.Module:
    """A factory that initialises at random without seeding (as torchvision's do)."""
    return nn.Linear(4, 4)


def _conv_stack(n: int) -> nn.Module:
    """The first ``n`` of three conv + ReLU layers of distinct shapes on a 3-channel image
    (what a network spec gets by default): ``n`` distinct conv tasks, each a prefix of the
    next stack's."""
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 1),
              nn.Conv2d(8, 16, 3, stride=2, padding=1)][:n]
    return nn.Sequential(*[m for conv in layers for m in (conv, nn.ReLU())]).eval()


def one_conv() -> nn.Module:
    """One conv task (:func:`_conv_stack`)."""
    return _conv_stack(1)


def two_convs() -> nn.Module:
    """That conv task and a second one."""
    return _conv_stack(2)


def three_convs() -> nn.Module:
    """Those two conv tasks and a third."""
    return _conv_stack(3)
