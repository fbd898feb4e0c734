"""Supervised pre-training of the GCN and head (paper Algorithm 1, lines 1-5)."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch import nn

from metatune.model import MetaTuneNet


class PretrainModule(pl.LightningModule):
    """Regress the normalized target of every training graph (MSE).

    Args:
        in_features, hidden, gcn_layers, head_hidden: :class:`MetaTuneNet` shape.
        lr: Adam learning rate (gamma in Algorithm 1).
        weight_decay: Adam weight decay.
    """

    def __init__(self, in_features: int, hidden: int = 64, gcn_layers: int = 2,
                 head_hidden: int = 64, lr: float = 1e-3, weight_decay: float = 0.0) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = MetaTuneNet(in_features, hidden, gcn_layers, head_hidden)

    def model_step(self, batch) -> torch.Tensor:
        pred = self.net(batch.x, batch.edge_index, batch.batch)
        return nn.functional.mse_loss(pred, batch.y.view(-1))

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
