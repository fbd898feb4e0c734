"""In-context adaptation: a learned attention from a task's candidates to its measured ones.

Gradient steps on the head (:class:`metatune.maml.InnerLoop`) move a few hundred weights
with a handful of samples, and on the held-out convs they have left the ranking nearly
where it was before any measurement (``docs/model-accuracy.md``). This is the other way
to use a task's measurements, as neural processes and TabPFN do: a module meta-trained on
episodes reads the support set itself. Each candidate attends over the measured ones by
a learned similarity of their graph embeddings and takes the attention-weighted mean of
their *residuals* (measured target minus the adapted head's prediction), so the
prediction moves towards what similar measured schedules turned out to be. A learned
null slot with residual 0 lets a candidate unlike every measured one keep the head's
prediction; with no support set (k = 0) the module adds nothing, so the zero-shot ranking
is the head's.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class SupportAttention(nn.Module):
    """Attention-weighted residuals of the measured candidates (Nadaraya-Watson with a
    learned metric and a null slot).

    Args:
        dim: Embedding size of a candidate (the head's input).
        width: Size of the query/key projections.
    """

    def __init__(self, dim: int, width: int) -> None:
        super().__init__()
        self.width = width
        self.query = nn.Linear(dim, width)
        self.key = nn.Linear(dim, width)
        self.null_key = nn.Parameter(torch.zeros(width))
        # log of the correction's scale: starts at 1 (the plain weighted mean residual)
        self.log_scale = nn.Parameter(torch.zeros(()))

    def forward(self, queries: Tensor, support: Tensor, residuals: Tensor) -> Tensor:
        """The correction of each query candidate's prediction.

        Args:
            queries: A ``n x dim`` tensor: embeddings of the candidates to score.
            support: A ``k x dim`` tensor: embeddings of the measured candidates.
            residuals: A ``k`` tensor: their targets minus the adapted head's predictions.

        Returns:
            A ``n`` tensor to add to the head's predictions (zeros when ``k`` is 0).
        """
        if support.size(0) == 0:
            return queries.new_zeros(queries.size(0))
        keys = torch.cat([self.key(support), self.null_key[None]], dim=0)
        values = torch.cat([residuals, residuals.new_zeros(1)])
        weights = torch.softmax(self.query(queries) @ keys.T / math.sqrt(self.width), dim=-1)
        return self.log_scale.exp() * (weights @ values)
