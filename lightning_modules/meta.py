"""MAML meta-training of the regression head (paper Algorithm 1, lines 6-13).

Each task adapts the head on its support set with :func:`metatune.maml.adapt` (the same
function the tuner fine-tunes with) and is scored on its query set; the meta-update
(beta) follows the summed query losses. As in the paper the GCN is frozen (its
embeddings come from pre-training); ``freeze_gcn=False`` trains it too.
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch import nn

from metatune.config import DEFAULT_ADAPT_LR, DEFAULT_ADAPT_STEPS
from metatune.maml import adapt, head_params, predict
from metatune.model import MetaTuneNet


class MetaModule(pl.LightningModule):
    """MAML over episodic tasks, with manual optimization.

    Args:
        in_features, hidden, gcn_layers, head_hidden: :class:`MetaTuneNet` shape.
        alpha: Inner step size.
        beta: Outer (meta) learning rate.
        inner_steps: Inner gradient steps per task.
        first_order: First-order MAML.
        freeze_gcn: Keep the pre-trained GCN fixed.
        eval_steps: Inner steps at validation (defaults to ``inner_steps``).
    """

    def __init__(self, in_features: int, hidden: int = 64, gcn_layers: int = 2,
                 head_hidden: int = 64, alpha: float = DEFAULT_ADAPT_LR, beta: float = 1e-3,
                 inner_steps: int = DEFAULT_ADAPT_STEPS, first_order: bool = False,
                 freeze_gcn: bool = True, eval_steps: int | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = MetaTuneNet(in_features, hidden, gcn_layers, head_hidden)
        self.automatic_optimization = False

    def _embed(self, batch) -> torch.Tensor:
        if self.hparams.freeze_gcn:
            with torch.no_grad():
                return self.net.embed(batch.x, batch.edge_index, batch.batch)
        return self.net.embed(batch.x, batch.edge_index, batch.batch)

    def task_losses(self, support, query, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Query MSE before and after adapting on the support set."""
        emb_s, emb_q = self._embed(support), self._embed(query)
        params = head_params(self.net.head)
        before = nn.functional.mse_loss(predict(self.net.head, params, emb_q), query.y.view(-1))
        fast = adapt(self.net.head, params, emb_s, support.y.view(-1), steps=steps,
                     lr=self.hparams.alpha, first_order=self.hparams.first_order)
        after = nn.functional.mse_loss(predict(self.net.head, fast, emb_q), query.y.view(-1))
        return before, after

    def training_step(self, tasks, batch_idx: int) -> None:
        opt = self.optimizers()
        opt.zero_grad()
        befores, afters = zip(*(self.task_losses(s, q, self.hparams.inner_steps)
                                for s, q in tasks))
        loss = torch.stack(afters).mean()
        self.manual_backward(loss)
        opt.step()
        self.log("meta/train_query_loss_before", torch.stack(befores).mean().detach(),
                 batch_size=len(tasks))
        self.log("meta/train_query_loss_after", loss.detach(), prog_bar=True,
                 batch_size=len(tasks))

    def validation_step(self, tasks, batch_idx: int) -> None:
        steps = self.hparams.eval_steps or self.hparams.inner_steps
        with torch.enable_grad():
            befores, afters = zip(*(self.task_losses(s, q, steps) for s, q in tasks))
        self.log("meta/val_query_loss_before", torch.stack(befores).mean(), batch_size=len(tasks))
        self.log("meta/val_query_loss_after", torch.stack(afters).mean(), prog_bar=True,
                 batch_size=len(tasks))

    def configure_optimizers(self):
        params = (self.net.head.parameters() if self.hparams.freeze_gcn
                  else self.net.parameters())
        return torch.optim.Adam(params, lr=self.hparams.beta)
