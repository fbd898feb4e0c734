"""The built-in networks beyond torchvision's classic CNNs, defined here with random weights.

``bert-tiny`` is a BERT-style encoder written in plain PyTorch (no ``transformers``, no
download); ``convnext-atto`` is torchvision's ConvNeXt at the smallest size. Both are built
from a config, seeded by the caller (:func:`tuner.engine.networks.builtin_module`).

The encoder writes its attention out as ``matmul``, ``softmax`` and ``matmul`` (not
``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer``, whose fused fast path and
``scaled_dot_product_attention`` would hide them), so TVM's importer sees what a BERT
exported from another framework holds: dense layers with a GELU epilogue, batched matmuls,
a softmax over the last axis and LayerNorms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class EncoderConfig:
    """A BERT-style encoder's sizes (defaults: BERT-tiny, 2 layers of hidden 128).

    Attributes:
        layers: Encoder layers.
        hidden: Hidden size (the input's last dimension).
        heads: Attention heads (``hidden`` must divide by it).
        intermediate: Feed-forward size.
        max_positions: Longest sequence (position embeddings).
        eps: LayerNorm epsilon (BERT's 1e-12).
    """

    layers: int = 2
    hidden: int = 128
    heads: int = 2
    intermediate: int = 512
    max_positions: int = 512
    eps: float = 1e-12


class SelfAttention(nn.Module):
    """Multi-head self-attention as explicit matmuls: ``softmax(q k^T / sqrt(d)) v``."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        if cfg.hidden % cfg.heads:
            raise ValueError(f"hidden {cfg.hidden} does not divide into {cfg.heads} heads")
        self.heads, self.head_dim = cfg.heads, cfg.hidden // cfg.heads
        self.query = nn.Linear(cfg.hidden, cfg.hidden)
        self.key = nn.Linear(cfg.hidden, cfg.hidden)
        self.value = nn.Linear(cfg.hidden, cfg.hidden)
        self.output = nn.Linear(cfg.hidden, cfg.hidden)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """``B x S x H`` -> ``B x heads x S x head_dim``."""
        b, s, _ = x.shape
        return x.reshape(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: a ``B x S x H`` tensor. Returns: a ``B x S x H`` tensor."""
        b, s, h = x.shape
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.output(context.permute(0, 2, 1, 3).reshape(b, s, h))


class EncoderLayer(nn.Module):
    """One post-norm BERT layer: attention, add & LayerNorm, GELU feed-forward, add & LayerNorm."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.attention_norm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.intermediate = nn.Linear(cfg.hidden, cfg.intermediate)
        self.act = nn.GELU()
        self.output = nn.Linear(cfg.intermediate, cfg.hidden)
        self.output_norm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: a ``B x S x H`` tensor. Returns: a ``B x S x H`` tensor."""
        x = self.attention_norm(x + self.attention(x))
        return self.output_norm(x + self.output(self.act(self.intermediate(x))))


class Encoder(nn.Module):
    """A BERT-style encoder that takes token embeddings, not token ids.

    The input is the word-embedding lookup's output (``inputs_embeds`` in Hugging Face's
    terms), a float ``B x S x H`` tensor: the rest of MetaTune (example inputs, output check,
    export, ONNX) feeds networks float32 inputs. Position and token-type embeddings are added
    inside, then BERT's embedding LayerNorm and the encoder layers; the output is the last
    hidden state (no pooler, no attention mask: every token attends to every token).
    """

    def __init__(self, cfg: EncoderConfig | None = None) -> None:
        super().__init__()
        cfg = cfg or EncoderConfig()
        self.cfg = cfg
        self.position = nn.Parameter(0.02 * torch.randn(cfg.max_positions, cfg.hidden))
        self.token_type = nn.Parameter(0.02 * torch.randn(cfg.hidden))
        self.embedding_norm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers))

    def forward(self, embeds: torch.Tensor) -> torch.Tensor:
        """Args: embeds: a ``B x S x H`` float tensor (``S`` at most ``max_positions``).

        Returns:
            The last hidden state, a ``B x S x H`` tensor.
        """
        x = self.embedding_norm(embeds + self.position[: embeds.shape[1]] + self.token_type)
        for layer in self.layers:
            x = layer(x)
        return x


def bert_tiny() -> nn.Module:
    """BERT-tiny's encoder (2 layers, hidden 128, 2 heads, intermediate 512), random weights."""
    return Encoder(EncoderConfig())


def bert_mini() -> nn.Module:
    """BERT-mini's encoder (4 layers, hidden 256, 4 heads, intermediate 1024), random weights:
    the checkpoints' validation encoder (choices about transformer workloads are made on it,
    ``bert-tiny`` reports them)."""
    return Encoder(EncoderConfig(layers=4, hidden=256, heads=4, intermediate=1024))


def convnext_atto() -> nn.Module:
    """ConvNeXt-atto (timm's smallest: dims 40/80/160/320, depths 2/2/6/2) from torchvision's
    ConvNeXt, random weights: LayerNorm, GELU, depthwise 7x7 and pointwise linears.

    The layer scale starts at 1, not torchvision's 1e-6 (a trained ConvNeXt learns scales far
    from it): at 1e-6 every block's branch would vanish beside its residual, and the output
    check could not see an error in it. Inference costs the same.
    """
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    stages = [CNBlockConfig(40, 80, 2), CNBlockConfig(80, 160, 2), CNBlockConfig(160, 320, 6),
              CNBlockConfig(320, None, 2)]
    return ConvNeXt(stages, layer_scale=1.0)
