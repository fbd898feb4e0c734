"""The MetaTune cost model (paper section 4, Figure 3): GCN embedding + regression head.

A GCN embeds the loop-nest graph, ReLU, then a weighted sum (learned per-node gates) and
a max pooling give a fixed-length embedding (layer-normalized); three fully connected
layers with ReLU predict the candidate's score. Higher is better: the target is the candidate's
throughput relative to its workload's best measured one (see :mod:`metatune.targets`).
Input features are standardized with statistics stored as buffers, so a checkpoint alone
rebuilds the model.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class MetaTuneNet(nn.Module):
    """GCN embedding and FC regression head.

    Args:
        in_features: Node feature size (``metatune.graph.NODE_FEATURES``).
        hidden: GCN width; the embedding is ``2 * hidden`` (weighted sum and max).
        gcn_layers: Number of ``GCNConv`` layers.
        head_hidden: Width of the two hidden FC layers.
        undirected: Propagate along both directions of every edge.
    """

    def __init__(self, in_features: int, hidden: int = 64, gcn_layers: int = 2,
                 head_hidden: int = 64, undirected: bool = True) -> None:
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.undirected = undirected
        dims = [in_features] + [hidden] * gcn_layers
        self.convs = nn.ModuleList(GCNConv(a, b) for a, b in zip(dims[:-1], dims[1:], strict=False))
        self.gate = nn.Linear(hidden, 1)
        # Sum pooling over hundreds of nodes gives large, graph-size dependent values;
        # normalizing the embedding keeps the head's inner-loop gradients well scaled.
        self.norm = nn.LayerNorm(2 * hidden)
        self.head = nn.Sequential(
            nn.Linear(2 * hidden, head_hidden), nn.ReLU(),
            nn.Linear(head_hidden, head_hidden), nn.ReLU(),
            nn.Linear(head_hidden, 1),
        )
        self.register_buffer("x_mean", torch.zeros(in_features))
        self.register_buffer("x_std", torch.ones(in_features))

    def set_normalization(self, mean: Tensor, std: Tensor) -> None:
        """Store node-feature statistics (``in_features`` tensors) used by :meth:`embed`.

        Features (nearly) constant in the training data keep a unit scale, so that a value
        unseen in training cannot blow up after standardization.
        """
        self.x_mean.copy_(mean)
        self.x_std.copy_(torch.where(std < 1e-3, torch.ones_like(std), std))

    def embed(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> Tensor:
        """Graph embeddings.

        Args:
            x: A ``num_nodes x in_features`` tensor.
            edge_index: A ``2 x num_edges`` tensor.
            batch: A ``num_nodes`` tensor giving each node's graph.

        Returns:
            A ``num_graphs x 2 * hidden`` tensor.
        """
        from torch_geometric.nn import global_add_pool, global_max_pool
        from torch_geometric.utils import to_undirected

        if self.undirected:
            edge_index = to_undirected(edge_index, num_nodes=x.size(0))
        h = (x - self.x_mean) / self.x_std
        for conv in self.convs:
            h = torch.relu(conv(h, edge_index))
        weighted = global_add_pool(torch.sigmoid(self.gate(h)) * h, batch)
        return self.norm(torch.cat([weighted, global_max_pool(h, batch)], dim=-1))

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> Tensor:
        """Scores of a batch of graphs: a ``num_graphs`` tensor (higher is better)."""
        return self.head(self.embed(x, edge_index, batch)).squeeze(-1)
