"""``run_train(cfg)``: supervised pre-training, then MAML meta-training, then a checkpoint.

The train configuration is one typed schema (:class:`TrainConfig`), merged with
``configs/train.yaml`` and dotlist overrides and validated once by
:func:`load_train_config`. Paths follow :mod:`metatune.config`'s one rule: relative to
the current directory, ``null`` for the repository's own location.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from metatune.config import (DEFAULT_CACHE_DIR, DEFAULT_GRAPH, REPO_ROOT, check_graph,
                             default_checkpoint, host_data_dir, merge_config, repo_path,
                             repo_relative, resolve_path)
from metatune.dataset import EPISODE_TARGETS
from metatune.errors import ConfigError
from metatune.maml import AdaptConfig
from metatune.provenance import machine_info, sidecar_path

logger = logging.getLogger("metatune.train")
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
    needs ``per_workload``: batches of that many graphs per workload); ``top_weight``
    weights the MSE part towards the good candidates (:func:`metatune.maml.top_weighted_mse`;
    0: plain MSE, the default)."""

    epochs: int = 10
    lr: float = 1e-3
    weight_decay: float = 0.0
    loss: str = "mse"
    per_workload: int = 0
    top_weight: float = 0.0

    def __post_init__(self) -> None:
        """Check the epochs and the loss.

        Raises:
            ConfigError: ``epochs`` or ``per_workload`` negative, an unknown loss, a
                ranking loss without ``per_workload``, or a negative ``top_weight``.
        """
        from metatune.maml import LOSSES

        _check_count("pretrain.epochs", self.epochs, zero=True)
        _check_count("pretrain.per_workload", self.per_workload, zero=True)
        if self.loss not in LOSSES:
            raise ConfigError(f"pretrain.loss={self.loss!r}: choose one of {', '.join(LOSSES)}")
        if self.top_weight < 0:
            raise ConfigError(f"pretrain.top_weight={self.top_weight}: a weight >= 0 "
                              "(0: plain MSE)")
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
    zero_shot_weight: float = 0.0
    val_every: int = 50
    val_tasks: int = 16

    def __post_init__(self) -> None:
        """Check the step count, the episode sizes and the zero-shot weight.

        Raises:
            ConfigError: A negative step count or weight, or an episode size not positive.
        """
        _check_count("meta.steps", self.steps, zero=True)
        if self.zero_shot_weight < 0:
            raise ConfigError(f"meta.zero_shot_weight={self.zero_shot_weight}: a weight "
                              ">= 0 (0: the query loss after adapting only, MAML's)")
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
    ``work/cache``, ``runs/train``, and ``checkpoints/<dataset>-<graph>.ckpt`` for ``out``.
    """

    data_dir: Optional[str] = None
    graph: str = DEFAULT_GRAPH
    pretrained: Optional[str] = None
    cache_dir: Optional[str] = None
    out: Optional[str] = None
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
        self.out = resolve_path(self.out) if self.out else default_checkpoint(
            dataset, graph=self.graph)


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


def run_train(cfg: TrainConfig) -> dict[str, Any]:
    """Pre-train (supervised), meta-train (MAML), and write the checkpoint.

    Args:
        cfg: A configuration from :func:`load_train_config` (or a :class:`TrainConfig`).

    Returns:
        ``{"checkpoint": path, "metrics": {...}}`` with the last logged metrics.
    """
    import pytorch_lightning as pl
    from pytorch_lightning.loggers import TensorBoardLogger

    from datamodules.graphs import GraphDataModule
    from lightning_modules.meta import MetaModule
    from lightning_modules.pretrain import PretrainModule
    from metatune.graph import NODE_FEATURES

    start = time.perf_counter()
    pl.seed_everything(cfg.seed, workers=True)
    platform = {**training_platform(cfg.data_dir, cfg.data.splits, cfg.data.mixed_platforms),
                "layouts": training_layouts(cfg.data_dir, cfg.data.splits)}
    m = cfg.meta
    dm = GraphDataModule(
        [os.path.join(cfg.data_dir, split) for split in cfg.data.splits], cfg.graph, cfg.cache_dir,
        cfg.data.val_fraction, cfg.data.batch_size, m.ways, m.shots, m.queries,
        m.tasks_per_batch, m.val_tasks, cfg.seed, targets=m.targets,
        per_workload=cfg.pretrain.per_workload, leave_out_networks=cfg.data.leave_out_networks)
    dm.setup()
    logger.info("%d training and %d validation workloads", len(dm.train_workloads),
                len(dm.val_workloads))
    mean, std = dm.feature_stats()
    shape = dict(in_features=NODE_FEATURES, **asdict(cfg.model))
    common = dict(accelerator=cfg.accelerator, strategy=cfg.strategy, devices=cfg.devices,
                  num_nodes=cfg.num_nodes, fast_dev_run=cfg.fast_dev_run,
                  enable_checkpointing=False, deterministic=False)

    pre = PretrainModule(**shape, lr=cfg.pretrain.lr, weight_decay=cfg.pretrain.weight_decay,
                         loss=cfg.pretrain.loss, top_weight=cfg.pretrain.top_weight)
    pre.net.set_normalization(mean, std)
    kept: dict[str, Any] | None = None  # the calibration in a head kept as it was
    if cfg.pretrained:  # start from a pre-trained network (e.g. shared by ablation variants)
        state, calibration = _pretrained_state(cfg.pretrained, cfg.graph, shape,
                                               m.adapt if m.steps == 0 else None)
        pre.net.load_state_dict(state)
        if cfg.pretrain.epochs == 0 and m.steps == 0:
            kept = calibration
    metrics: dict[str, float] = {}
    if cfg.pretrain.epochs > 0:
        trainer = pl.Trainer(max_epochs=cfg.pretrain.epochs, **common,
                             logger=TensorBoardLogger(cfg.log_dir, name=f"{cfg.graph}-pretrain"))
        trainer.fit(pre, datamodule=dm)
        metrics.update({k: float(v) for k, v in trainer.callback_metrics.items()})

    meta = MetaModule(**shape, beta=m.beta, adapt=asdict(m.adapt), first_order=m.first_order,
                      freeze_gcn=m.freeze_gcn, zero_shot_weight=m.zero_shot_weight,
                      graph=cfg.graph, platform=platform, calibration=kept)
    meta.net.load_state_dict(pre.net.state_dict())
    trainer = pl.Trainer(max_steps=max(1, m.steps), **common, inference_mode=False,
                         val_check_interval=max(1, min(m.val_every, m.steps)),
                         check_val_every_n_epoch=None, limit_val_batches=m.val_tasks,
                         logger=TensorBoardLogger(cfg.log_dir, name=f"{cfg.graph}-meta"))
    if m.steps > 0:
        trainer.fit(meta, train_dataloaders=dm.episodes(True),
                    val_dataloaders=dm.episodes(False, seed=cfg.seed + 1))
        metrics.update({k: float(v) for k, v in trainer.callback_metrics.items()})
    else:
        trainer.strategy.connect(meta)
    if cfg.calibrate:
        metrics.update(calibrate_scale(meta, dm.val_workloads))
    out = cfg.out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if m.steps > 0:
        trainer.save_checkpoint(out)  # the global rank 0 writes
    elif trainer.is_global_zero:
        _save_plain(meta, out)
    if trainer.is_global_zero:
        provenance = write_provenance(out, cfg, dm, metrics, time.perf_counter() - start)
        logger.info("checkpoint: %s (how it was made: %s)", out, provenance)
    return {"checkpoint": out, "metrics": metrics}


def calibrate_scale(meta, val_workloads: list) -> dict[str, float]:
    """Fold the zero-shot scale, fitted on the validation workloads, into the meta-trained
    head (:func:`metatune.calibration.calibrate`) and record it in the module's settings.

    A head that already carries a calibration (a checkpoint kept as it was, ``meta.steps=0``)
    has it undone first, so the fit is made on the meta-trained scores as always and
    calibrating again changes nothing. A fit that cannot be made (no validation workloads,
    too few samples, a reversed fit) leaves the head as it was, with its calibration if it
    had one, and a warning that says why.

    Returns:
        The calibration's figures as metrics (``calibration/*``), empty if none was made.
    """
    from metatune.calibration import (ScaleCalibration, calibrate, fold_into_head,
                                      unfold_from_head)
    from metatune.errors import CalibrationError

    recorded = meta.hparams.get("calibration")
    earlier = ScaleCalibration.from_dict(recorded) if recorded else None
    if earlier:
        unfold_from_head(meta.net.head, earlier)
    try:
        cal = calibrate(meta.net, val_workloads)
    except CalibrationError as err:
        if earlier:
            fold_into_head(meta.net.head, earlier)
            logger.warning("the earlier calibration kept (slope %.3f): %s", earlier.slope, err)
        else:
            logger.warning("checkpoint left uncalibrated: %s", err)
        return {}
    meta.hparams.calibration = cal.to_dict()
    logger.info("zero-shot scale: target = %.3f * score + %.3f on %d validation samples of %d "
                "workloads (MSE %.4f -> %.4f)", cal.slope, cal.intercept, cal.samples,
                cal.workloads, cal.mse_before, cal.mse_after)
    return {f"calibration/{k}": float(v) for k, v in cal.to_dict().items()}


def training_platform(data_dir: str, splits: list[str], mixed: bool = False) -> dict:
    """Where the training splits were measured (:func:`metatune.dataset.dataset_platform`).

    Args:
        data_dir: The dataset the splits are folders of (or relative to).
        splits: The training splits.
        mixed: Allow splits of several platforms (``data.mixed_platforms``).

    Returns:
        The platform (``target``, ``cpu``, ``cpu_flags``). With splits of several platforms:
        that of the first split of ``data_dir`` itself (whose name the checkpoint takes),
        plus ``mixed``: one entry per split, ``{"split": ..., **platform}``, so that a tuner
        can say what the model was trained on.

    Raises:
        ConfigError: Two splits were measured on different platforms (CPU, flags, target)
            and ``mixed`` is not set.
    """
    from metatune.dataset import dataset_platform

    platforms = {s: dataset_platform(os.path.join(data_dir, s)) for s in splits}
    first = platforms[splits[0]]
    if all(p == first for p in platforms.values()):
        return first
    if not mixed:
        other = next(s for s, p in platforms.items() if p != first)
        raise ConfigError(f"data.splits: {other} was measured on {platforms[other]}, "
                          f"{splits[0]} on {first}; train on splits of one platform, or set "
                          "data.mixed_platforms=true to train across them on purpose (the "
                          "checkpoint records every platform)")
    root = os.path.realpath(data_dir) + os.sep
    own = [s for s in splits if os.path.realpath(os.path.join(data_dir, s)).startswith(root)]
    return {**platforms[own[0] if own else splits[0]],
            "mixed": [{"split": s, **p} for s, p in platforms.items()]}


def training_layouts(data_dir: str, splits: list[str]) -> list[str]:
    """The data layouts the training splits' convolutions were measured in (``NCHW``,
    ``NHWC``), so that a tuner can say when it tunes tasks of a layout the model never saw
    (:func:`metatune.dataset.dataset_layout`)."""
    from metatune.dataset import dataset_layout

    return sorted({dataset_layout(os.path.join(data_dir, s)) for s in splits})


def _pretrained_state(path: str, graph: str, shape: dict[str, Any],
                      adapt: AdaptConfig | None = None
                      ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The network weights of a ``train.py`` checkpoint, checked against this run, and the
    zero-shot scale folded into them (its settings' ``calibration``, ``None`` if none).

    Args:
        path: The checkpoint.
        graph: This run's graph mode.
        shape: This run's network shape (``in_features`` and :class:`ModelConfig`).
        adapt: This run's adaptation, when the checkpoint's head is kept as it was
            meta-trained (``meta.steps=0``: it must have been meta-trained for the same).

    Raises:
        ConfigError: The checkpoint cannot be read, or was trained on another graph mode,
            feature version, network shape or (with ``adapt``) adaptation.
    """
    import torch

    from metatune.graph import FEATURE_VERSION

    try:
        blob = torch.load(path, map_location="cpu", weights_only=False)
        hparams, state = blob["hyper_parameters"], blob["state_dict"]
    except Exception as err:  # torch raises many types on a bad file
        raise ConfigError(f"pretrained={path!r} is not a readable train.py checkpoint "
                          f"({type(err).__name__}); train one with python train.py") from err
    want = {"graph": graph, "feature_version": FEATURE_VERSION, **shape}
    wrong = {k: hparams.get(k) for k, v in want.items() if hparams.get(k) != v}
    if wrong:
        raise ConfigError(f"pretrained={path!r} does not match this run ({wrong} there, "
                          f"{ {k: want[k] for k in wrong} } here)")
    if adapt is not None:
        from metatune.checkpoint import adapt_settings

        trained = adapt_settings(hparams.get("adapt"), hparams.get("alpha"),
                                 hparams.get("inner_steps"))
        if trained.meta_sgd or trained.context:
            raise ConfigError(f"pretrained={path!r} learned step sizes or a support-set "
                              "attention that meta.steps=0 would not keep: meta-train it again")
        if trained != adapt:
            diff = {k: v for k, v in trained.to_dict().items() if adapt.to_dict().get(k) != v}
            raise ConfigError(f"pretrained={path!r} was meta-trained to adapt with {diff}, "
                              f"this run keeps its head (meta.steps=0) and would adapt with "
                              f"{ {k: adapt.to_dict()[k] for k in diff} }: pass "
                              + " ".join(f"meta.adapt.{k}={v}" for k, v in diff.items()))
    return ({k[len("net."):]: v for k, v in state.items() if k.startswith("net.")},
            hparams.get("calibration"))


def write_provenance(checkpoint: str, cfg: TrainConfig, dm, metrics: dict[str, float],
                     seconds: float) -> str:
    """Write ``<checkpoint>.json``: command, date, machine, data, settings and final metrics.

    Returns:
        The path written.
    """
    import json
    import sys

    path = sidecar_path(checkpoint)
    doc = {
        "checkpoint": os.path.basename(checkpoint),
        "command": "python train.py " + " ".join(sys.argv[1:]) if sys.argv[0].endswith(
            "train.py") else "run_train(cfg) (see config)",
        "machine": machine_info(),
        "train_seconds": round(seconds, 1),
        "data": {
            "dir": repo_relative(cfg.data_dir),
            "splits": list(cfg.data.splits),
            "train_workloads": [w.name for w in dm.train_workloads],
            "val_workloads": [w.name for w in dm.val_workloads],
            "train_samples": sum(len(w.graphs) for w in dm.train_workloads),
            "val_samples": sum(len(w.graphs) for w in dm.val_workloads),
        },
        "target": ("relative throughput: best run time of the workload / candidate's run time"
                   + ("; in meta-training, of the task's support samples"
                      if cfg.meta.targets == "support" else "")),
        "metrics": metrics,
        "config": {**asdict(cfg), **{k: repo_relative(getattr(cfg, k)) for k in PATH_KEYS}},
    }
    before = sidecar_path(cfg.pretrained) if cfg.pretrained else None
    if before and os.path.isfile(before):  # how the network started: kept whole
        try:
            with open(before, encoding="utf-8") as f:
                doc["pretrained_from"] = json.load(f)
        except (OSError, ValueError) as err:
            doc["pretrained_from"] = f"unreadable {repo_relative(before)}: {err}"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return path


def _save_plain(module, path: str) -> None:
    """Save a module that was never fitted in Lightning's checkpoint format."""
    import pytorch_lightning as pl
    import torch

    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams),
                "pytorch-lightning_version": pl.__version__}, path)
