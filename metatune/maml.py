"""Adaptation to one task's measurements, shared by MAML meta-training, the tuner's online
fine-tuning and the accuracy benchmark.

:class:`InnerLoop` takes gradient steps on a support set with *fast weights*: a name ->
tensor dict of the adapted parameters, evaluated with ``torch.func.functional_call`` so
that the same code runs MAML's inner loop (keeping the graph for the meta-gradient, or
not with ``first_order``) and the tuner's per-task fine-tuning. What it adapts and how is
an :class:`AdaptConfig`, stored in the checkpoint beside the weights it was meta-trained
for:

- ``scope``: the regression ``head`` (the paper), the head and the ``last_gcn`` layer, or
  ``all`` parameters;
- ``steps`` and ``lr``: inner steps and step size;
- ``loss``: ``mse`` on the relative throughput, or MSE beside a pairwise rank loss
  (``mse+rank``: RankNet's logistic loss over the pairs of a task, as learned
  tensor-program cost models use).

Retired (:mod:`metatune.retired`): Meta-SGD's learned step sizes, the in-context
support-set attention and the ``rank``, ``list`` and ``mse+list`` losses.

The inputs of an adaptation are the support set's embeddings when only the head adapts
(computed once, the cheap path the tuner takes every round), else the graph batch itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
from torch import Tensor, nn
from torch.func import functional_call

from metatune.errors import ConfigError
from metatune.retired import loss_message

SCOPES = ("head", "last_gcn", "all")
LOSSES = ("mse", "mse+rank")


@dataclass
class AdaptConfig:
    """How a network adapts to a task (see the module docstring): the one copy of these
    defaults (train's ``meta.adapt`` section; the tuner reads a checkpoint's own).

    Attributes:
        scope: ``head``, ``last_gcn`` or ``all``.
        steps: Inner gradient steps.
        lr: Inner step size.
        loss: ``mse`` or ``mse+rank``.
    """

    scope: str = "head"
    steps: int = 5
    lr: float = 0.01
    loss: str = "mse+rank"  # chosen on validation: docs/lab/cost-model/adaptation-ablation-val.md

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ConfigError(f"adapt scope={self.scope!r}: choose one of {', '.join(SCOPES)}")
        check_loss(self.loss, "adapt loss")
        if self.steps < 0 or self.lr <= 0:
            raise ConfigError(f"adapt steps={self.steps}, lr={self.lr}: steps must be >= 0 "
                              "and lr > 0")

    def to_dict(self) -> dict:
        """Plain dict (checkpoint hyper-parameters, reports)."""
        return asdict(self)


def pairwise_rank_loss(pred: Tensor, target: Tensor) -> Tensor:
    """RankNet's logistic loss over every ordered pair of a task.

    Args:
        pred: A ``k`` tensor of scores.
        target: A ``k`` tensor of targets (higher is better).

    Returns:
        ``mean(softplus(-(pred_i - pred_j)))`` over the pairs with ``target_i > target_j``
        (0 when all targets tie).
    """
    better = (target[:, None] - target[None, :]) > 1e-6
    if not bool(better.any()):
        return pred.sum() * 0.0
    return nn.functional.softplus(-(pred[:, None] - pred[None, :])[better]).mean()


def check_loss(loss: str, key: str) -> None:
    """Refuse a loss that is not one of :data:`LOSSES` (a retired one says why).

    Raises:
        ConfigError: An unknown or retired loss, naming ``key``.
    """
    if loss in LOSSES:
        return
    why = loss_message(loss)
    raise ConfigError(f"{key}={loss!r}: " + (why or f"choose one of {', '.join(LOSSES)}"))


def task_loss(pred: Tensor, target: Tensor, kind: str) -> Tensor:
    """The adaptation loss of one task, ``kind`` one of :data:`LOSSES` (or ``rank``, the
    ranking part alone, which pre-training adds per workload)."""
    mse = nn.functional.mse_loss(pred, target) if "mse" in kind else 0.0
    rank = pairwise_rank_loss(pred, target) if "rank" in kind else 0.0
    return mse + rank


def adapted_names(net: nn.Module, scope: str) -> list[str]:
    """The names (in ``net``) of the parameters an adaptation of ``scope`` changes.

    Args:
        net: A :class:`metatune.model.MetaTuneNet`.
        scope: One of :data:`SCOPES`.
    """
    names = [n for n, _ in net.named_parameters()]
    if scope == "all":
        return names
    keep = ("head.",)
    if scope == "last_gcn":
        keep += (f"convs.{len(net.convs) - 1}.",)
    return [n for n in names if n.startswith(keep)]


class InnerLoop(nn.Module):
    """Adapts a network to a task's support set.

    The network is passed to each call, not owned; the loop has no weights of its own (a
    module still, so that a checkpoint's ``inner.*`` entries, none since Meta-SGD was
    retired, load as before).

    Args:
        net: The network whose adapted parameters :attr:`names` lists.
        cfg: How to adapt.
    """

    def __init__(self, net: nn.Module, cfg: AdaptConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.names = adapted_names(net, cfg.scope)

    def override(self, *, steps: int | None = None, lr: float | None = None) -> None:
        """Adapt with other steps or step size than meta-training chose (``None``: keep).

        Args:
            steps: Inner gradient steps.
            lr: Inner step size.
        """
        self.cfg = replace(self.cfg, steps=self.cfg.steps if steps is None else int(steps),
                           lr=self.cfg.lr if lr is None else float(lr))

    @property
    def head_only(self) -> bool:
        """Whether only the head adapts (inputs are embeddings, computed once)."""
        return self.cfg.scope == "head"

    def inputs(self, net: nn.Module, batch) -> Tensor | object:
        """What :meth:`adapt` and :meth:`predict` take for a PyG graph batch: the frozen
        embeddings (``num_graphs x d``) when only the head adapts, else the batch."""
        if not self.head_only:
            return batch
        with torch.no_grad():
            return net.embed(batch.x, batch.edge_index, batch.batch)

    def initial(self, net: nn.Module, *, detach: bool = False) -> dict[str, Tensor]:
        """The starting fast weights: the network's adapted parameters (detached and made
        to require gradients with ``detach``, for adaptation outside meta-training, and
        for those the network does not train)."""
        params = dict(net.named_parameters())
        # a frozen parameter (no meta-gradient) still adapts: from a detached copy
        return {n: params[n] if params[n].requires_grad and not detach
                else params[n].detach().requires_grad_(True) for n in self.names}

    def predict(self, net: nn.Module, fast: dict[str, Tensor], inputs) -> Tensor:
        """Scores with fast weights: a ``num_graphs`` tensor.

        Args:
            net: The network.
            fast: Fast weights (:meth:`initial` or :meth:`adapt`).
            inputs: :meth:`inputs` of the graphs to score: a graph batch, or embeddings (a
                ``num_graphs x d`` tensor), which only the head's fast weights then score.
        """
        if isinstance(inputs, Tensor):
            head = {n[len("head."):]: w for n, w in fast.items() if n.startswith("head.")}
            return functional_call(net.head, head, (inputs,)).squeeze(-1)
        return functional_call(net, fast, (inputs.x, inputs.edge_index, inputs.batch))

    def adapt(self, net: nn.Module, fast: dict[str, Tensor], inputs, targets: Tensor, *,
              first_order: bool = False, steps: int | None = None) -> dict[str, Tensor]:
        """Take the configured gradient steps on a support set.

        Args:
            net: The network (its own parameters are not modified).
            fast: Initial fast weights (:meth:`initial`, or a previous result).
            inputs: :meth:`inputs` of the support graphs.
            targets: A ``k`` tensor of support targets.
            first_order: Drop second-order terms (no graph through the inner gradients).
            steps: Override the configured number of steps.

        Returns:
            The adapted fast weights.
        """
        for _ in range(self.cfg.steps if steps is None else steps):
            loss = task_loss(self.predict(net, fast, inputs), targets, self.cfg.loss)
            grads = torch.autograd.grad(loss, list(fast.values()), allow_unused=True,
                                        create_graph=not first_order and torch.is_grad_enabled())
            fast = {n: w if g is None else w - self.cfg.lr * g
                    for (n, w), g in zip(fast.items(), grads, strict=True)}
        return fast
