"""Supervised pre-training of the GCN and head (paper Algorithm 1, lines 1-5)."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch import nn

from metatune.maml import check_loss, task_loss
from metatune.model import MetaTuneNet


class PretrainModule(pl.LightningModule):
    """Regress the normalized target of every training graph (MSE), and optionally rank the
    graphs of each workload in a batch.

    Args:
        in_features, hidden, gcn_layers, head_hidden: :class:`MetaTuneNet` shape.
        lr: Adam learning rate (gamma in Algorithm 1).
        weight_decay: Adam weight decay.
        loss: One of :data:`metatune.maml.LOSSES`: MSE over the batch plus, for
            ``mse+rank``, the pairwise rank loss over each workload's graphs in the batch
            (graphs carry their workload in ``wid``; batch them with
            :class:`datamodules.graphs.WorkloadBatchSampler`), averaged over workloads.
    """

    def __init__(self, in_features: int, hidden: int = 64, gcn_layers: int = 2,
                 head_hidden: int = 64, lr: float = 1e-3, weight_decay: float = 0.0,
                 loss: str = "mse") -> None:
        super().__init__()
        check_loss(loss, "pretrain.loss")
        self.save_hyperparameters()
        self.net = MetaTuneNet(in_features, hidden, gcn_layers, head_hidden)

    def model_step(self, batch) -> torch.Tensor:
        pred = self.net(batch.x, batch.edge_index, batch.batch)
        y = batch.y.view(-1)
        loss = nn.functional.mse_loss(pred, y)
        if "rank" in self.hparams.loss:
            groups = [batch.wid == w for w in torch.unique(batch.wid)]
            terms = [task_loss(pred[m], y[m], "rank") for m in groups if int(m.sum()) > 1]
            if terms:
                loss = loss + torch.stack(terms).mean()
        return loss

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        loss = self.model_step(batch)
        self.log("pretrain/train_loss", loss, prog_bar=True, batch_size=batch.num_graphs)
        return loss

    def validation_step(self, batch, batch_idx: int) -> None:
        self.log("pretrain/val_loss", self.model_step(batch), prog_bar=True,
                 batch_size=batch.num_graphs)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr,
                                weight_decay=self.hparams.weight_decay)
