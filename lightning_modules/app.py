"""``run_train(cfg)``: supervised pre-training, then MAML meta-training, then a checkpoint.

The configuration (:class:`~lightning_modules.config.TrainConfig`,
:func:`~lightning_modules.config.load_train_config`) lives in :mod:`lightning_modules.config`.
The run checks where it will write
before anything slow (:func:`lightning_modules.config.check_output`), shows progress from
its first second (the dataset's encoding has a bar with an ETA), and reads a ``pretrained``
checkpoint as tensors and plain data only: nothing in the file runs.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict
from typing import Any

from lightning_modules.config import PATH_KEYS, TrainConfig, check_output
from metatune.config import repo_relative
from metatune.errors import CheckpointError, ConfigError
from metatune.maml import AdaptConfig
from metatune.provenance import machine_info, sidecar_path

__all__ = ["calibrate_scale", "run_train", "training_layouts", "training_platform"]

logger = logging.getLogger("metatune.train")


def run_train(cfg: TrainConfig) -> dict[str, Any]:
    """Pre-train (supervised), meta-train (MAML), and write the checkpoint.

    Args:
        cfg: A configuration from :func:`lightning_modules.config.load_train_config` (or a
            :class:`TrainConfig`).

    Returns:
        ``{"checkpoint": path, "metrics": {...}}`` with the last logged metrics.
    """
    start = time.perf_counter()
    check_output(cfg)  # before anything slow: an existing file is replaced only on request
    logger.info("training on %s (%s), %s graphs; checkpoint: %s", repo_relative(cfg.data_dir),
                ", ".join(cfg.data.splits), cfg.graph, repo_relative(cfg.out))
    import pytorch_lightning as pl
    from pytorch_lightning.loggers import TensorBoardLogger

    from datamodules.graphs import GraphDataModule
    from lightning_modules.meta import MetaModule
    from lightning_modules.pretrain import PretrainModule
    from metatune.graph import NODE_FEATURES

    pl.seed_everything(cfg.seed, workers=True)
    platform = {**training_platform(cfg.data_dir, cfg.data.splits, cfg.data.mixed_platforms),
                "layouts": training_layouts(cfg.data_dir, cfg.data.splits)}
    m = cfg.meta
    shape = dict(in_features=NODE_FEATURES, **asdict(cfg.model))
    pretrained = None
    if cfg.pretrained:  # start from a pre-trained network (e.g. shared by ablation variants)
        pretrained = _pretrained_state(cfg.pretrained, cfg.graph, shape,  # checked first
                                       m.adapt if m.steps == 0 else None)
    dm = GraphDataModule(
        [os.path.join(cfg.data_dir, split) for split in cfg.data.splits], cfg.graph, cfg.cache_dir,
        cfg.data.val_fraction, cfg.data.batch_size, m.ways, m.shots, m.queries,
        m.tasks_per_batch, m.val_tasks, cfg.seed, targets=m.targets,
        per_workload=cfg.pretrain.per_workload, leave_out_networks=cfg.data.leave_out_networks)
    dm.setup()
    logger.info("%d training and %d validation workloads", len(dm.train_workloads),
                len(dm.val_workloads))
    mean, std = dm.feature_stats()
    common = dict(accelerator=cfg.accelerator, strategy=cfg.strategy, devices=cfg.devices,
                  num_nodes=cfg.num_nodes, fast_dev_run=cfg.fast_dev_run,
                  enable_checkpointing=False, deterministic=False)

    pre = PretrainModule(**shape, lr=cfg.pretrain.lr, weight_decay=cfg.pretrain.weight_decay,
                         loss=cfg.pretrain.loss)
    pre.net.set_normalization(mean, std)
    kept: dict[str, Any] | None = None  # the calibration in a head kept as it was
    if pretrained is not None:
        state, calibration = pretrained
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
                      freeze_gcn=m.freeze_gcn,
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
        # the global rank 0 writes the weights and settings (what tune.py and pretrained=
        # read), not the optimizer's state: nothing resumes a run from it
        trainer.save_checkpoint(out, weights_only=True)
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
    from metatune.calibration import ScaleCalibration, calibrate, fold_into_head, unfold_from_head
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
        shape: This run's network shape (``in_features`` and
            :class:`lightning_modules.config.ModelConfig`).
        adapt: This run's adaptation, when the checkpoint's head is kept as it was
            meta-trained (``meta.steps=0``: it must have been meta-trained for the same).

    Raises:
        ConfigError: The checkpoint cannot be read, or was trained on another graph mode,
            feature version, network shape or (with ``adapt``) adaptation.
    """
    from metatune.checkpoint import read
    from metatune.graph import FEATURE_VERSION

    try:  # tensors and plain data only (weights_only=True): nothing in the file runs
        hparams, state = read(path)
    except CheckpointError as err:
        raise ConfigError(f"pretrained: {err}") from err
    want = {"graph": graph, "feature_version": FEATURE_VERSION, **shape}
    wrong = {k: hparams.get(k) for k, v in want.items() if hparams.get(k) != v}
    if wrong:
        raise ConfigError(f"pretrained={path!r} does not match this run ({wrong} there, "
                          f"{ {k: want[k] for k in wrong} } here)")
    if adapt is not None:
        from metatune.checkpoint import adapt_settings

        trained = adapt_settings(hparams.get("adapt"), hparams.get("alpha"),
                                 hparams.get("inner_steps"), path)
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
