"""The collect configuration: one typed schema (:class:`CollectConfig`), the YAML defaults
(``configs/collect.yaml``) and command-line overrides, merged and validated once by
:func:`load_collect_config`. Paths follow :mod:`metatune.config`'s rule (relative to the
current directory); ``out`` and ``work_dir`` left ``null`` are the target's own,
``data/<target>-<cpu>`` and ``work/collect/<target>-<cpu>``
(:func:`tuner.app.collect.resolve_paths`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from metatune.config import REPO_ROOT, merge_config, resolve_path
from metatune.errors import ConfigError
from tuner.app.config import RunnerConfig

DEFAULT_COLLECT_YAML = os.path.join(REPO_ROOT, "configs", "collect.yaml")
#: The network training splits, in order, and the setting that names each one's networks:
#: the conv tasks of those networks, every held-out task and every task of the splits
#: before it left out, so that each only adds tasks (``train-more-networks`` holds none of
#: ``train-networks``'s).
NETWORK_SPLITS = {"train-networks": "train_networks", "train-more-networks": "more_networks",
                  "train-mobile-networks": "mobile_networks"}
#: The split of generated transformer workloads (:mod:`metatune.workloads_transformer`:
#: batch matmul, dense over tokens with and without GELU, softmax, LayerNorm); it has no
#: NHWC twin (no convolution to convert).
TRANSFORMER_SPLIT = "train-transformer"
#: ``train`` / ``heldout`` (NCHW, as networks are imported) and their NHWC twins: the
#: training workloads of the 2-D kinds and the network convs as ``tune.py`` extracts them
#: in its default layout; then the network training splits (:data:`NETWORK_SPLITS`) and
#: their NHWC twins; then :data:`TRANSFORMER_SPLIT`.
SPLITS = ("train", "heldout", "train-nhwc", "heldout-nhwc",
          *(name + twin for name in NETWORK_SPLITS for twin in ("", "-nhwc")),
          TRANSFORMER_SPLIT)
DEFAULT_SPLITS = ("train", "heldout")
NETWORKS = ("alexnet", "resnet-18", "vgg-16", "squeezenet")
#: Networks whose conv tasks make the ``train-networks`` split: none of the held-out four.
TRAIN_NETWORKS = ("mobilenet-v2", "torchvision.models:resnet50",
                  "torchvision.models:googlenet", "torchvision.models:mnasnet1_0",
                  "torchvision.models:shufflenet_v2_x1_0")
#: Networks whose conv tasks make the ``train-more-networks`` split: plain, wide and grouped
#: convs of other shapes (1x7 / 7x1 among them), none of them held out.
MORE_NETWORKS = ("torchvision.models:inception_v3", "torchvision.models:densenet121",
                 "torchvision.models:wide_resnet50_2", "torchvision.models:resnext50_32x4d")
#: Networks whose conv tasks make the ``train-mobile-networks`` split: the depthwise,
#: squeeze-excite and grouped convs of mobile and searched (RegNet) networks, none held out.
MOBILE_NETWORKS = ("torchvision.models:efficientnet_b0", "torchvision.models:mobilenet_v3_large",
                   "torchvision.models:regnet_x_800mf", "torchvision.models:regnet_y_800mf")


@dataclass
class CollectConfig:
    """Every setting of ``collect.py run``; ``configs/collect.yaml`` documents them."""

    out: Optional[str] = None
    work_dir: Optional[str] = None
    # a name, or a target dict (given on the command line as target={...}): kept as text
    target: Any = "llvm"
    num_cores: Optional[int] = None
    splits: list[str] = field(default_factory=lambda: list(DEFAULT_SPLITS))
    per_kind: int = 14
    other_per_kind: int = 4
    seed: int = 0
    transformer_per_kind: int = 8
    train_samples: int = 64
    heldout_samples: int = 96
    networks: list[str] = field(default_factory=lambda: list(NETWORKS))
    train_networks: list[str] = field(default_factory=lambda: list(TRAIN_NETWORKS))
    train_networks_samples: int = 48
    more_networks: list[str] = field(default_factory=lambda: list(MORE_NETWORKS))
    mobile_networks: list[str] = field(default_factory=lambda: list(MOBILE_NETWORKS))
    trials_per_round: int = 32
    limit: Optional[int] = None
    builder_timeout_sec: float = 30.0
    runner: RunnerConfig = field(default_factory=lambda: RunnerConfig(min_repeat_ms=50))
    progress: bool = True

    def __post_init__(self) -> None:
        """Check the counts and splits; make given paths absolute.

        Raises:
            ConfigError: A count that is not positive, or an unknown split.
        """
        for key in ("train_samples", "heldout_samples", "train_networks_samples", "per_kind",
                    "other_per_kind", "transformer_per_kind", "trials_per_round"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{key}={getattr(self, key)!r}: must be a positive integer")
        unknown = set(self.splits) - set(SPLITS)
        if unknown:
            raise ConfigError(f"splits={self.splits}: choose among {', '.join(SPLITS)}")
        self.out = resolve_path(self.out) if self.out else None
        self.work_dir = resolve_path(self.work_dir) if self.work_dir else None
        if isinstance(self.target, Mapping):  # target={"kind": "llvm", "mcpu": "haswell"}
            self.target = json.dumps(dict(self.target))
        elif not isinstance(self.target, str):
            raise ConfigError(f"target={self.target!r}: give llvm, cuda, rocm or a target "
                              'dict such as {"kind": "llvm", "mcpu": "haswell"}')


def load_collect_config(overrides: list[str] | None = None,
                        yaml_path: str | None = DEFAULT_COLLECT_YAML) -> CollectConfig:
    """Schema + YAML defaults + dotlist overrides, validated.

    Raises:
        ConfigError: Unknown key, wrong type or invalid value, naming the key.
    """
    return merge_config(CollectConfig, yaml_path, overrides, "collect")
