"""``run_train(cfg)``: supervised pre-training, then MAML meta-training, then a checkpoint."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from metatune.config import REPO_ROOT, default_checkpoint, merge_config
from metatune.errors import ConfigError
from metatune.provenance import machine_info

logger = logging.getLogger("metatune.train")
DEFAULT_TRAIN_YAML = os.path.join(REPO_ROOT, "configs", "train.yaml")


@dataclass
class ModelConfig:
    hidden: int = 64
    gcn_layers: int = 2
    head_hidden: int = 64


@dataclass
class DataConfig:
    val_fraction: float = 0.15
    batch_size: int = 64


@dataclass
class PretrainConfig:
    epochs: int = 10
    lr: float = 1e-3
    weight_decay: float = 0.0


@dataclass
class MetaConfig:
    steps: int = 300
    ways: int = 5
    shots: int = 8
    queries: int = 16
    tasks_per_batch: int = 4
    alpha: float = 0.01
    beta: float = 1e-3
    inner_steps: int = 5
    first_order: bool = False
    freeze_gcn: bool = True
    val_every: int = 50
    val_tasks: int = 16


@dataclass
class TrainConfig:
    """Every setting of ``train.py``; ``configs/train.yaml`` holds the defaults."""

    data_dir: str = "data/llvm"
    graph: str = "super"
    cache_dir: str = "work/cache"
    out: str | None = None
    log_dir: str = "runs/train"
    seed: int = 0
    accelerator: str = "auto"
    fast_dev_run: bool = False
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    meta: MetaConfig = field(default_factory=MetaConfig)


def load_train_config(yaml_path: str | None = DEFAULT_TRAIN_YAML,
                      overrides: list[str] | None = None) -> dict[str, Any]:
    """Schema + YAML defaults + dotlist overrides, validated, as a plain dict.

    Raises:
        ConfigError: Unknown key, wrong type or invalid value.
    """
    plain = merge_config(TrainConfig, yaml_path, overrides, "train")
    if plain["graph"] not in ("super", "plain"):
        raise ConfigError(f"graph={plain['graph']!r}: choose super or plain")
    for section, key in (("pretrain", "epochs"), ("meta", "steps"), ("meta", "ways"),
                         ("meta", "shots"), ("meta", "queries"), ("data", "batch_size")):
        if plain[section][key] < 0 or (key != "epochs" and key != "steps" and
                                       plain[section][key] == 0):
            raise ConfigError(f"{section}.{key}={plain[section][key]}: must be positive")
    return plain


def _abs(path: str) -> str:
    return path if os.path.isabs(path) else os.path.join(REPO_ROOT, path)


def run_train(cfg: dict[str, Any]) -> dict[str, Any]:
    """Pre-train (supervised), meta-train (MAML), and write the checkpoint.

    Args:
        cfg: A configuration from :func:`load_train_config`.

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
    pl.seed_everything(cfg["seed"], workers=True)
    dm = GraphDataModule(
        os.path.join(_abs(cfg["data_dir"]), "train"), cfg["graph"], _abs(cfg["cache_dir"]),
        cfg["data"]["val_fraction"], cfg["data"]["batch_size"], cfg["meta"]["ways"],
        cfg["meta"]["shots"], cfg["meta"]["queries"], cfg["meta"]["tasks_per_batch"],
        cfg["meta"]["val_tasks"], cfg["seed"])
    dm.setup()
    logger.info("%d training and %d validation workloads", len(dm.train_workloads),
                len(dm.val_workloads))
    mean, std = dm.feature_stats()
    shape = dict(in_features=NODE_FEATURES, **cfg["model"])
    log_dir = _abs(cfg["log_dir"])
    common = dict(accelerator=cfg["accelerator"], devices=1, fast_dev_run=cfg["fast_dev_run"],
                  enable_checkpointing=False, deterministic=False)

    pre = PretrainModule(**shape, lr=cfg["pretrain"]["lr"],
                         weight_decay=cfg["pretrain"]["weight_decay"])
    pre.net.set_normalization(mean, std)
    metrics: dict[str, float] = {}
    if cfg["pretrain"]["epochs"] > 0:
        trainer = pl.Trainer(max_epochs=cfg["pretrain"]["epochs"], **common,
                             logger=TensorBoardLogger(log_dir, name=f"{cfg['graph']}-pretrain"))
        trainer.fit(pre, datamodule=dm)
        metrics.update({k: float(v) for k, v in trainer.callback_metrics.items()})

    m = cfg["meta"]
    meta = MetaModule(**shape, alpha=m["alpha"], beta=m["beta"], inner_steps=m["inner_steps"],
                      first_order=m["first_order"], freeze_gcn=m["freeze_gcn"], graph=cfg["graph"])
    meta.net.load_state_dict(pre.net.state_dict())
    trainer = pl.Trainer(max_steps=max(1, m["steps"]), **common, inference_mode=False,
                         val_check_interval=max(1, min(m["val_every"], m["steps"])),
                         check_val_every_n_epoch=None, limit_val_batches=m["val_tasks"],
                         logger=TensorBoardLogger(log_dir, name=f"{cfg['graph']}-meta"))
    if m["steps"] > 0:
        trainer.fit(meta, train_dataloaders=dm.episodes(True),
                    val_dataloaders=dm.episodes(False, seed=cfg["seed"] + 1))
        metrics.update({k: float(v) for k, v in trainer.callback_metrics.items()})
    else:
        trainer.strategy.connect(meta)
    dataset = os.path.basename(os.path.normpath(cfg["data_dir"]))
    out = _abs(cfg["out"]) if cfg["out"] else default_checkpoint(dataset, cfg["graph"])
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if m["steps"] > 0:
        trainer.save_checkpoint(out)
    else:
        _save_plain(meta, out)
    provenance = write_provenance(out, cfg, dm, metrics, time.perf_counter() - start)
    logger.info("checkpoint: %s (how it was made: %s)", out, provenance)
    return {"checkpoint": out, "metrics": metrics}


def write_provenance(checkpoint: str, cfg: dict[str, Any], dm, metrics: dict[str, float],
                     seconds: float) -> str:
    """Write ``<checkpoint>.json``: command, date, machine, data, settings and final metrics.

    Returns:
        The path written.
    """
    import json
    import sys

    path = os.path.splitext(checkpoint)[0] + ".json"
    doc = {
        "checkpoint": os.path.basename(checkpoint),
        "command": "python train.py " + " ".join(sys.argv[1:]) if sys.argv[0].endswith(
            "train.py") else "run_train(cfg) (see config)",
        "machine": machine_info(),
        "train_seconds": round(seconds, 1),
        "data": {
            "dir": cfg["data_dir"],
            "train_workloads": [w.name for w in dm.train_workloads],
            "val_workloads": [w.name for w in dm.val_workloads],
            "train_samples": sum(len(w.graphs) for w in dm.train_workloads),
            "val_samples": sum(len(w.graphs) for w in dm.val_workloads),
        },
        "target": "relative throughput: best run time of the workload / candidate's run time",
        "metrics": metrics,
        "config": cfg,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return path


def _save_plain(module, path: str) -> None:
    """Save a module that was never fitted in Lightning's checkpoint format."""
    import pytorch_lightning as pl
    import torch

    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams),
                "pytorch-lightning_version": pl.__version__}, path)
