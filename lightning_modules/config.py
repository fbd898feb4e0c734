"""The train configuration: one typed schema (:class:`TrainConfig`), merged with
``configs/train.yaml`` and dotlist overrides and validated once by :func:`load_train_config`.

Paths follow :mod:`metatune.config`'s one rule: relative to the current directory, ``null``
for the repository's own location. ``out`` defaults to ``runs/train/<dataset>-<graph>.ckpt``
(a place of the user's, never a shipped checkpoint), and an existing file there is replaced
only with ``overwrite=true`` (:func:`check_output`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from metatune.config import (
    DEFAULT_CACHE_DIR,
    DEFAULT_GRAPH,
    REPO_ROOT,
    check_graph,
    host_data_dir,
    merge_config,
    repo_path,
    repo_relative,
    resolve_path,
)
from metatune.dataset import EPISODE_TARGETS
from metatune.errors import ConfigError
from metatune.maml import AdaptConfig
from metatune.provenance import sidecar_path

DEFAULT_TRAIN_YAML = os.path.join(REPO_ROOT, "configs", "train.yaml")
#: The path settings of :class:`TrainConfig` (absolute once it is made).
PATH_KEYS = ("data_dir", "cache_dir", "out", "log_dir")


@dataclass
class ModelConfig:
    """The GCN's and the regression head's widths and depth."""

    hidden: int = 64
    gcn_layers: int = 2
    head_hidden: int = 64


@dataclass
class DataConfig:
    """The training splits, the validation split and the supervised batch size.

    ``splits`` are folders of ``data_dir`` trained on together: ``train`` (NCHW, as
    networks are imported), ``train-nhwc`` (the 2-D kinds in NHWC, ``tune.py``'s default
    layout) and ``train-networks`` (other networks' convs) when collected; a split of another
    dataset is named by its path relative to ``data_dir`` (``../llvm-icelake-server/train``)
    and, being measured on another platform, needs ``mixed_platforms``. A held-out split is
    never trained on.

    ``leave_out_networks`` drops every workload that one of these networks uses
    (``meta.json``'s ``networks``), so that their convs can validate a choice of training
    data (``bench/model_accuracy.py --split train-networks --networks ...``).
    """

    splits: list[str] = field(default_factory=lambda: ["train"])
    val_fraction: float = 0.15
    batch_size: int = 64
    mixed_platforms: bool = False
    leave_out_networks: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Check the batch size and the splits.

        Raises:
            ConfigError: ``batch_size`` not positive; no split, or a held-out one.
        """
        _check_count("data.batch_size", self.batch_size)
        if not self.splits or any(not os.path.basename(os.path.normpath(s)).startswith("train")
                                  for s in self.splits):
            raise ConfigError(f"data.splits={list(self.splits)}: give one or more training "
                              "splits (train, train-nhwc, train-networks); the held-out "
                              "splits are for evaluation only")


@dataclass
class PretrainConfig:
    """Supervised pre-training (0 epochs: none): ``loss`` one of
    :data:`metatune.maml.LOSSES` (a ranking part compares the graphs of one workload, so it
    needs ``per_workload``: batches of that many graphs per workload)."""

    epochs: int = 10
    lr: float = 1e-3
    weight_decay: float = 0.0
    loss: str = "mse"
    per_workload: int = 0

    def __post_init__(self) -> None:
        """Check the epochs and the loss.

        Raises:
            ConfigError: ``epochs`` or ``per_workload`` negative, an unknown loss, a
                ranking loss without ``per_workload``.
        """
        from metatune.maml import check_loss

        _check_count("pretrain.epochs", self.epochs, zero=True)
        _check_count("pretrain.per_workload", self.per_workload, zero=True)
        check_loss(self.loss, "pretrain.loss")
        if self.loss != "mse" and not self.per_workload:
            raise ConfigError(f"pretrain.loss={self.loss}: a ranking loss compares graphs of "
                              "one workload; set pretrain.per_workload (e.g. 16)")


@dataclass
class MetaConfig:
    """MAML meta-training (0 steps: none; the pre-trained network is saved)."""

    steps: int = 1500
    ways: int = 1
    shots: int = 32
    queries: int = 16
    tasks_per_batch: int = 8
    targets: str = "workload"
    beta: float = 3e-3
    adapt: AdaptConfig = field(default_factory=AdaptConfig)
    first_order: bool = False
    freeze_gcn: bool = True
    val_every: int = 50
    val_tasks: int = 16

    def __post_init__(self) -> None:
        """Check the step count and the episode sizes.

        Raises:
            ConfigError: A negative step count, or an episode size not positive.
        """
        _check_count("meta.steps", self.steps, zero=True)
        for key in ("ways", "shots", "queries"):
            _check_count(f"meta.{key}", getattr(self, key))
        if self.targets not in EPISODE_TARGETS:
            raise ConfigError(f"meta.targets={self.targets!r}: choose one of "
                              f"{', '.join(EPISODE_TARGETS)}")


@dataclass
class TrainConfig:
    """Every setting of ``train.py``, with its default; ``configs/train.yaml`` documents them.

    Made (by :func:`load_train_config`, or directly), the paths are absolute: a given one
    resolved against the current directory, one left ``None`` the repository's: this
    CPU's ``data/llvm-<cpu>`` if collected, else the shipped ``data/llvm-icelake-server``;
    ``work/cache``, ``runs/train``, and ``runs/train/<dataset>-<graph>.ckpt`` for ``out``
    (never a shipped checkpoint: pass ``out=checkpoints/...`` to put one there). An ``out``
    that exists (or its ``.json``) is replaced only with ``overwrite=true``.
    """

    data_dir: Optional[str] = None
    graph: str = DEFAULT_GRAPH
    pretrained: Optional[str] = None
    cache_dir: Optional[str] = None
    out: Optional[str] = None
    overwrite: bool = False
    log_dir: Optional[str] = None
    seed: int = 0
    accelerator: str = "auto"
    strategy: str = "auto"
    devices: int = 1
    num_nodes: int = 1
    fast_dev_run: bool = False
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    meta: MetaConfig = field(default_factory=MetaConfig)
    calibrate: bool = True

    def __post_init__(self) -> None:
        """Check the graph mode and resolve the paths.

        Raises:
            ConfigError: An unknown graph mode, or per-workload batches with several
                processes (not supported yet).
        """
        self.graph = check_graph(self.graph, "graph")
        if self.pretrain.per_workload and self.devices * self.num_nodes > 1:
            raise ConfigError("pretrain.per_workload with several processes (devices x "
                              "num_nodes > 1) is not supported yet: pre-train in one process "
                              "(devices=1), then meta-train from it with pretrained=<ckpt>")
        self.data_dir = resolve_path(self.data_dir) if self.data_dir else host_data_dir()
        self.cache_dir = resolve_path(self.cache_dir) if self.cache_dir else DEFAULT_CACHE_DIR
        self.pretrained = resolve_path(self.pretrained) if self.pretrained else None
        self.log_dir = (resolve_path(self.log_dir) if self.log_dir
                        else repo_path("runs", "train"))
        dataset = os.path.basename(os.path.normpath(self.data_dir))
        self.out = (resolve_path(self.out) if self.out
                    else repo_path("runs", "train", f"{dataset}-{self.graph}.ckpt"))


def check_output(cfg: TrainConfig) -> None:
    """Refuse to replace a file this run did not ask to replace: ``cfg.out`` or its
    provenance ``<out>.json`` exists and ``cfg.overwrite`` is false. Checked at the start
    of a run: the workers a distributed launch starts check before anything is written.

    Raises:
        ConfigError: One line naming the file and both ways out.
    """
    if cfg.overwrite:
        return
    for path in (cfg.out, sidecar_path(cfg.out)):
        if os.path.exists(path):
            raise ConfigError(f"{repo_relative(path)} exists and this run would replace it "
                              f"(out={repo_relative(cfg.out)}): pass another out=PATH, or "
                              "overwrite=true to replace it")


def _check_count(key: str, value: int, *, zero: bool = False) -> None:
    """Refuse a count below 1 (below 0 when ``zero`` is allowed).

    Raises:
        ConfigError: Naming ``key``.
    """
    if value < 0 or (value == 0 and not zero):
        raise ConfigError(f"{key}={value}: must be positive")


def load_train_config(yaml_path: str | None = DEFAULT_TRAIN_YAML,
                      overrides: list[str] | None = None) -> TrainConfig:
    """Schema + YAML defaults + dotlist overrides, validated once.

    Args:
        yaml_path: YAML file with defaults (``None``: the schema's defaults only).
        overrides: Dotlist overrides such as ``["graph=plain", "meta.steps=500"]``.

    Returns:
        The typed configuration.

    Raises:
        ConfigError: Unknown key, wrong type or invalid value.
    """
    return merge_config(TrainConfig, yaml_path, overrides, "train")
