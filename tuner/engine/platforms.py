"""Platforms: a target's name, and what a dataset or a checkpoint on disk was made for.

A dataset is measured for one platform, a target kind and the CPU (or GPU architecture)
it compiles for, and lives in ``data/<platform>`` (e.g. ``data/llvm-icelake-server``);
``train.py`` writes ``checkpoints/<platform>-<graph>.ckpt`` from it, with a ``.json``
beside it that names the splits. Which of them a target uses when none is named is the
application's policy (:mod:`tuner.app.checkpoints`).
"""

from __future__ import annotations

import json
import os

from metatune.config import platform_name, repo_path, target_dict
from metatune.provenance import sidecar_path


def platform_id(target) -> str:
    """The platform's name: target kind and CPU (or GPU architecture).

    Args:
        target: A ``tvm.target.Target``.

    Returns:
        e.g. ``"llvm-icelake-server"``, ``"llvm-generic"`` without an ``mcpu``.
    """
    attrs = getattr(target, "attrs", None) or {}
    return platform_name(str(target.kind.name), attrs.get("mcpu") or attrs.get("arch"))


def dataset_target(data_dir: str) -> dict | None:
    """The target a dataset (or one of its splits) was measured for, from its ``meta.json``.

    Args:
        data_dir: ``data/<platform>`` or one of its splits (``.../train``).

    Returns:
        TVM's target dict (``kind``, ``mcpu``, ``num-cores``, ...), or ``None`` when no
        readable ``meta.json`` says.
    """
    for split in (data_dir, os.path.join(data_dir, "train")):
        path = os.path.join(split, "meta.json")
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as f:
                    return target_dict(json.load(f)["target"])
            except (OSError, ValueError, KeyError, TypeError):
                return None
    return None


def dataset_kind(data_dir: str) -> str | None:
    """The target kind a dataset (or one of its splits) was measured for (``None``: not
    said)."""
    target = dataset_target(data_dir)
    return str(target["kind"]) if target else None


def checkpoint_data(checkpoint: str) -> dict:
    """The ``data`` section of the ``.json`` that ``train.py`` writes beside a checkpoint
    (``dir``, ``splits``, ``train_workloads``, ``val_workloads``, sample counts).

    Raises:
        OSError, ValueError, KeyError, TypeError: No readable sidecar, or none with that
            section.
    """
    with open(sidecar_path(checkpoint), encoding="utf-8") as f:
        return json.load(f)["data"]


def checkpoint_splits(checkpoint: str) -> list[str] | None:
    """The dataset splits a checkpoint was trained on (:func:`checkpoint_data`'s ``dir``
    and ``splits``), as absolute split directories; ``None`` when it has no readable
    sidecar, or a split is not here."""
    try:
        data = checkpoint_data(checkpoint)
        splits = [os.path.normpath(repo_path(data["dir"], s))
                  for s in (data.get("splits") or ["train"])]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return splits if all(os.path.isfile(os.path.join(s, "meta.json")) for s in splits) else None
