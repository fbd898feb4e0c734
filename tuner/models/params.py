"""The cost models' settings (the tune configuration's ``metatune`` and ``xfer`` sections):
plain data with the one copy of their defaults, read by the configuration, the factory
(:func:`tuner.app.tuning.make_cost_model`) and the models alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from metatune.errors import ConfigError


@dataclass
class MetaTuneModelConfig:
    """The MetaTune cost model (``cost_model=metatune``)."""

    checkpoint: Optional[str] = None  # default: checkpoints/llvm-<graph>.ckpt
    graph: str = "super"
    from_scratch: bool = False
    adapt_steps: Optional[int] = None  # null: the checkpoint's (what it was meta-trained for)
    adapt_lr: Optional[float] = None  # null: the checkpoint's (ignored with Meta-SGD)

    def __post_init__(self) -> None:
        if self.graph not in ("super", "plain"):
            raise ConfigError(f"metatune.graph={self.graph!r}: choose super or plain")


@dataclass
class XferConfig:
    """Where ``xgb-xfer`` finds its pre-training data and caches its base model."""

    data: str = "data/llvm/train"
    cache_dir: str = "work/cache"
