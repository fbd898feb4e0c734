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
- ``steps`` and ``lr``: inner steps and step size; with ``meta_sgd`` every adapted tensor
  has its own learned step sizes (Meta-SGD, Li et al. 2017), meta-trained with the rest;
- ``loss``: ``mse`` on the relative throughput, a pairwise ``rank`` loss (RankNet's
  logistic loss over the pairs of a task, as learned tensor-program cost models use), a
  listwise ``list`` loss (ListNet's cross-entropy between the top-one distributions of
  targets and scores), or MSE beside either (``mse+rank``, ``mse+list``);
- ``context``: after the steps, an attention over the support set corrects each
  prediction by the residuals of similar measured candidates
  (:class:`metatune.context.SupportAttention`, meta-trained with the rest; head scope only).

The inputs of an adaptation are the support set's embeddings when only the head adapts
(computed once, the cheap path the tuner takes every round), else the graph batch itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
from torch import Tensor, nn
from torch.func import functional_call

from metatune.context import SupportAttention
from metatune.errors import ConfigError

SCOPES = ("head", "last_gcn", "all")
LOSSES = ("mse", "rank", "mse+rank", "list", "mse+list")
#: ListNet's temperature, in units of relative throughput: a candidate 0.1 below another
#: is e (2.7) times less likely to be the best. Targets within a task span [0, 1].
LIST_TEMPERATURE = 0.1
#: Fast-weight entries that hold the support set for the in-context correction (embeddings
#: and residuals), not weights: never stepped on, passed from :meth:`InnerLoop.adapt` to
#: :meth:`InnerLoop.predict`.
MEMORY = ("context.support", "context.residuals")


@dataclass
class AdaptConfig:
    """How a network adapts to a task (see the module docstring): the one copy of these
    defaults (train's ``meta.adapt`` section; the tuner reads a checkpoint's own).

    Attributes:
        scope: ``head``, ``last_gcn`` or ``all``.
        steps: Inner gradient steps.
        lr: Inner step size (the initial one with ``meta_sgd``).
        loss: ``mse``, ``rank``, ``mse+rank``, ``list`` or ``mse+list``.
        meta_sgd: Learn a step size per adapted parameter.
        context: Width of the support-set attention (in-context adaptation); 0: none.
    """

    scope: str = "head"
    steps: int = 5
    lr: float = 0.01
    loss: str = "mse+rank"  # chosen on validation workloads: docs/adaptation-ablation-val.md
    meta_sgd: bool = False
    context: int = 0

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ConfigError(f"adapt scope={self.scope!r}: choose one of {', '.join(SCOPES)}")
        if self.loss not in LOSSES:
            raise ConfigError(f"adapt loss={self.loss!r}: choose one of {', '.join(LOSSES)}")
        if self.steps < 0 or self.lr <= 0:
            raise ConfigError(f"adapt steps={self.steps}, lr={self.lr}: steps must be >= 0 "
                              "and lr > 0")
        if self.context < 0 or (self.context and self.scope != "head"):
            raise ConfigError(f"adapt context={self.context} with scope={self.scope!r}: the "
                              "support-set attention reads frozen embeddings, so it needs "
                              "scope=head and a width > 0 (or context=0)")

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


def listwise_loss(pred: Tensor, target: Tensor,
                  temperature: float = LIST_TEMPERATURE) -> Tensor:
    """ListNet's top-one cross-entropy over the candidates of a task (Cao et al. 2007).

    Args:
        pred: A ``k`` tensor of scores.
        target: A ``k`` tensor of targets (higher is better).
        temperature: Softmax temperature of both distributions, in target units.

    Returns:
        ``-sum(softmax(target / T) * log_softmax(pred / T))`` minus its value at
        ``pred = target`` (the targets' entropy), so a perfect score is 0 and the loss
        adds to MSE on the same footing whatever the task's size.
    """
    p = torch.softmax(target / temperature, dim=0)
    cross = -(p * torch.log_softmax(pred / temperature, dim=0)).sum()
    entropy = -(p * torch.log_softmax(target / temperature, dim=0)).sum()
    return cross - entropy


def top_weighted_mse(pred: Tensor, target: Tensor, top_weight: float) -> Tensor:
    """MSE with each sample weighted by ``1 + top_weight * target``: the good candidates
    (relative throughput near 1), whose error MSE(D) scores and the search acts on, count
    up to ``1 + top_weight`` times a poor one's; ``top_weight = 0`` is plain MSE.

    Args:
        pred: An ``n`` tensor of predictions.
        target: An ``n`` tensor of targets (relative throughput, higher is better).
        top_weight: The extra weight of a target of 1 (>= 0).

    Returns:
        The weighted mean of the squared errors (weights normalized to mean 1).
    """
    if not top_weight:  # plain MSE, computed as before the weight existed
        return nn.functional.mse_loss(pred, target)
    weight = 1.0 + top_weight * target.clamp(min=0.0)
    return (weight * (pred - target) ** 2).sum() / weight.sum()


def task_loss(pred: Tensor, target: Tensor, kind: str) -> Tensor:
    """The adaptation loss of one task, ``kind`` one of :data:`LOSSES`."""
    mse = nn.functional.mse_loss(pred, target) if "mse" in kind else 0.0
    rank = pairwise_rank_loss(pred, target) if "rank" in kind else 0.0
    listwise = listwise_loss(pred, target) if "list" in kind else 0.0
    return mse + rank + listwise


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
    """Adapts a network to a task's support set; holds Meta-SGD's learned step sizes.

    The network is passed to each call, not owned, so that the step sizes are this
    module's only parameters (they sit beside the network in a checkpoint).

    Args:
        net: The network whose parameter shapes the step sizes take.
        cfg: How to adapt.
    """

    def __init__(self, net: nn.Module, cfg: AdaptConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.names = adapted_names(net, cfg.scope)
        params = dict(net.named_parameters())
        self.lrs = nn.ParameterDict(
            {_key(n): nn.Parameter(torch.full_like(params[n], cfg.lr)) for n in self.names}
            if cfg.meta_sgd else {})
        self.context = (SupportAttention(net.head[0].in_features, cfg.context)
                        if cfg.context else None)

    def override(self, *, steps: int | None = None, lr: float | None = None,
                 scope: str | None = None, net: nn.Module | None = None) -> None:
        """Adapt with other steps, step size or scope than meta-training chose (``None``:
        keep); a step size is ignored under Meta-SGD, whose step sizes are learned.

        Args:
            steps: Inner gradient steps.
            lr: Inner step size.
            scope: What adapts (one of :data:`SCOPES`); needs ``net``.
            net: The network the scope's parameters are named in.

        Raises:
            ConfigError: A scope without the network, an unknown scope, or one that
                Meta-SGD's learned step sizes or the support-set attention do not cover.
        """
        cfg = replace(self.cfg, steps=self.cfg.steps if steps is None else int(steps),
                      lr=self.cfg.lr if lr is None else float(lr),
                      scope=self.cfg.scope if scope is None else scope)
        if cfg.scope != self.cfg.scope:
            if net is None:
                raise ConfigError("a new adaptation scope needs the network (net=...)")
            if self.cfg.meta_sgd:
                raise ConfigError(f"adapt scope={cfg.scope!r}: this checkpoint learned step "
                                  f"sizes for scope={self.cfg.scope!r} only (Meta-SGD); "
                                  "keep its scope")
            self.names = adapted_names(net, cfg.scope)
        self.cfg = cfg

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
            scores = functional_call(net.head, head, (inputs,)).squeeze(-1)
            if self.context is not None and MEMORY[0] in fast:
                scores = scores + self.context(inputs, fast[MEMORY[0]], fast[MEMORY[1]])
            return scores
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
            The adapted fast weights; with ``context``, also the support set's embeddings
            and residuals under the :data:`MEMORY` names.
        """
        fast = {n: w for n, w in fast.items() if n not in MEMORY}
        for _ in range(self.cfg.steps if steps is None else steps):
            loss = task_loss(self.predict(net, fast, inputs), targets, self.cfg.loss)
            grads = torch.autograd.grad(loss, list(fast.values()), allow_unused=True,
                                        create_graph=not first_order and torch.is_grad_enabled())
            fast = {n: w if g is None else w - self._lr(n) * g
                    for (n, w), g in zip(fast.items(), grads)}
        if self.context is not None:
            residuals = targets - self.predict(net, fast, inputs)
            fast = {**fast, MEMORY[0]: inputs, MEMORY[1]: residuals}
        return fast

    def _lr(self, name: str) -> Tensor | float:
        return self.lrs[_key(name)] if self.cfg.meta_sgd else self.cfg.lr


def _key(name: str) -> str:
    """A parameter name usable as a ``ParameterDict`` key (no dots)."""
    return name.replace(".", "__")
