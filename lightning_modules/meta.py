"""MAML meta-training (paper Algorithm 1, lines 6-13), with the adaptation it is trained for.

Each task adapts on its support set with :class:`metatune.maml.InnerLoop` (the code the
tuner fine-tunes with online) and is scored on its query set; the meta-update (beta)
follows the mean query loss after adapting (MAML's objective). As in the paper the GCN's
initial weights stay those of pre-training (``freeze_gcn``); what the inner loop adapts
(the head, the last GCN layer too, or everything), its steps and loss are the ``adapt``
settings, saved in the checkpoint with the graph mode and feature version the network
was trained on.
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch

from metatune.checkpoint import adapt_settings, build, retired_hparams
from metatune.graph import FEATURE_VERSION
from metatune.maml import task_loss


class MetaModule(pl.LightningModule):
    """MAML over episodic tasks, with manual optimization.

    Args:
        in_features, hidden, gcn_layers, head_hidden: :class:`MetaTuneNet` shape.
        beta: Outer (meta) learning rate.
        adapt: :class:`metatune.maml.AdaptConfig` fields (scope, steps, lr, loss).
        first_order: First-order MAML.
        freeze_gcn: Keep the pre-trained GCN's initial weights fixed.
        eval_steps: Inner steps at validation (defaults to ``adapt["steps"]``).
        graph: The graph mode of the training data (``super`` or ``plain``).
        feature_version: :data:`metatune.graph.FEATURE_VERSION` of the training data.
        platform: Where the training data was measured (target, CPU model and flags; see
            :func:`metatune.dataset.dataset_platform`), so that a tuner on another CPU can
            say it is transferring; ``layouts``: the data layouts of its convolutions.
        calibration: The zero-shot scale folded into the head after meta-training
            (:meth:`metatune.calibration.ScaleCalibration.to_dict`), ``None`` if none.
        alpha, inner_steps: Older checkpoints' names of ``adapt["lr"]`` and
            ``adapt["steps"]``; read when ``adapt`` is absent.
        zero_shot_weight: A retired setting older checkpoints store
            (:mod:`metatune.retired`): accepted at 0 and dropped, refused otherwise.
    """

    def __init__(self, in_features: int, hidden: int = 64, gcn_layers: int = 2,
                 head_hidden: int = 64, beta: float = 1e-3,
                 adapt: dict[str, Any] | None = None, first_order: bool = False,
                 freeze_gcn: bool = True, eval_steps: int | None = None,
                 graph: str | None = None, feature_version: int | None = FEATURE_VERSION,
                 platform: dict[str, Any] | None = None,
                 calibration: dict[str, Any] | None = None, alpha: float | None = None,
                 inner_steps: int | None = None, zero_shot_weight: float | None = None) -> None:
        super().__init__()
        retired_hparams({"zero_shot_weight": zero_shot_weight}, "MetaModule")
        adapt = adapt_settings(adapt, alpha, inner_steps, "MetaModule").to_dict()  # saved
        self.save_hyperparameters(ignore=["alpha", "inner_steps", "zero_shot_weight"])
        self.hparams.adapt = adapt
        # the same construction as the tuner's checkpoint reader (metatune.checkpoint)
        self.net, self.inner = build(dict(self.hparams))
        if freeze_gcn:  # only the head's initial weights are meta-trained (DDP needs to know)
            for name, p in self.net.named_parameters():
                p.requires_grad_(name.startswith("head."))
        self.automatic_optimization = False

    def task_losses(self, support, query, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Query loss (the adaptation loss) before and after adapting on the support set."""
        inputs_s, inputs_q = self._inputs(support), self._inputs(query)
        fast = self.inner.initial(self.net)
        kind = self.inner.cfg.loss
        before = task_loss(self.inner.predict(self.net, fast, inputs_q), query.y.view(-1), kind)
        fast = self.inner.adapt(self.net, fast, inputs_s, support.y.view(-1),
                                first_order=self.hparams.first_order, steps=steps)
        after = task_loss(self.inner.predict(self.net, fast, inputs_q), query.y.view(-1), kind)
        return before, after

    def _inputs(self, batch):
        """The inner loop's inputs for a graph batch (embeddings when only the head adapts:
        without gradient when the GCN is frozen)."""
        if not self.inner.head_only:
            return batch
        if self.hparams.freeze_gcn:
            return self.inner.inputs(self.net, batch)
        return self.net.embed(batch.x, batch.edge_index, batch.batch)

    def meta_objective(self, tasks) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The outer loss of a meta-batch: the mean query loss after adapting.

        Returns:
            ``(objective, loss before, loss after)``: three scalars (the objective is the
            loss after).
        """
        befores, afters = zip(*(self.task_losses(s, q, self.inner.cfg.steps) for s, q in tasks),
                               strict=False)
        before, after = torch.stack(befores).mean(), torch.stack(afters).mean()
        return after, before, after

    def training_step(self, tasks, batch_idx: int) -> None:
        opt = self.optimizers()
        opt.zero_grad()
        objective, before, after = self.meta_objective(tasks)
        self.manual_backward(objective)
        opt.step()
        self.log("meta/train_objective", objective.detach(), batch_size=len(tasks))
        self.log("meta/train_query_loss_before", before.detach(), batch_size=len(tasks))
        self.log("meta/train_query_loss_after", after.detach(), prog_bar=True,
                 batch_size=len(tasks))

    def validation_step(self, tasks, batch_idx: int) -> None:
        steps = self.hparams.eval_steps or self.inner.cfg.steps
        with torch.enable_grad():
            befores, afters = zip(*(self.task_losses(s, q, steps) for s, q in tasks), strict=False)
        self.log("meta/val_query_loss_before", torch.stack(befores).mean(), batch_size=len(tasks))
        self.log("meta/val_query_loss_after", torch.stack(afters).mean(), prog_bar=True,
                 batch_size=len(tasks))

    def configure_optimizers(self):
        params = list(self.net.head.parameters() if self.hparams.freeze_gcn
                      else self.net.parameters())
        return torch.optim.Adam(params + list(self.inner.parameters()), lr=self.hparams.beta)
