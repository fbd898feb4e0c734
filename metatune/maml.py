"""The adaptation function shared by MAML meta-training and online fine-tuning.

Fast weights are a dict of the regression head's parameters; ``torch.func.functional_call``
evaluates the head with them, so the same code runs the inner loop of MAML (keeping the
graph for the meta-gradient, or not with ``first_order``) and the tuner's per-task
fine-tuning on fresh measurements.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call

Loss = Callable[[Tensor, Tensor], Tensor]


def head_params(head: nn.Module) -> dict[str, Tensor]:
    """The head's parameters as a name -> tensor dict (the initial fast weights)."""
    return dict(head.named_parameters())


def adapt(head: nn.Module, params: dict[str, Tensor], embeddings: Tensor, targets: Tensor,
          *, steps: int, lr: float, loss_fn: Loss = nn.functional.mse_loss,
          first_order: bool = False) -> dict[str, Tensor]:
    """Take ``steps`` gradient steps of the head on a support set.

    Args:
        head: The regression head (its own parameters are not modified).
        params: Initial fast weights (``head_params(head)`` or a previous result).
        embeddings: A ``k x d`` tensor of support-set graph embeddings.
        targets: A ``k`` tensor of support-set targets.
        steps: Inner gradient steps.
        lr: Inner step size (alpha).
        loss_fn: ``loss_fn(prediction, target) -> scalar``.
        first_order: Drop second-order terms (no graph through the inner gradients).

    Returns:
        The adapted fast weights.
    """
    fast = dict(params)
    for _ in range(steps):
        pred = functional_call(head, fast, (embeddings,)).squeeze(-1)
        loss = loss_fn(pred, targets)
        grads = torch.autograd.grad(loss, list(fast.values()),
                                    create_graph=not first_order and torch.is_grad_enabled())
        fast = {name: w - lr * g for (name, w), g in zip(fast.items(), grads)}
    return fast


def predict(head: nn.Module, params: dict[str, Tensor], embeddings: Tensor) -> Tensor:
    """Head predictions with fast weights: a ``k`` tensor."""
    return functional_call(head, params, (embeddings,)).squeeze(-1)
