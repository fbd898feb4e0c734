"""Which dataset and checkpoint serve a target: one of each per platform.

A dataset is measured for one platform, a target kind and the CPU (or GPU architecture)
it compiles for, and lives in ``data/<platform>`` (e.g. ``data/llvm-icelake-server``);
``train.py`` writes ``checkpoints/<platform>-<graph>.ckpt`` from it. When nothing is
named, a target uses its own platform's dataset and checkpoint when this repository has
them, and the shipped ones for the same target kind otherwise (the dataset
:data:`metatune.config.SHIPPED_DATASET`, the checkpoint
:data:`metatune.config.FALLBACK_CHECKPOINT`): a checkpoint trained on other CPUs still
ranks another's schedules, and loading it says so in one line
(:meth:`tuner.models.cost_model.TrainedModel.platform_note`).
"""

from __future__ import annotations

import json
import os

from metatune.config import (FALLBACK_CHECKPOINT, SHIPPED_DATASET, default_checkpoint,
                             platform_name, repo_path, repo_relative, target_dict)
from metatune.errors import ConfigError
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


def _shipped_for(kind: str, what: str) -> str:
    """The platform whose dataset (``what="dataset"``) or checkpoint a target of kind
    ``kind`` without its own uses, if it is of that kind."""
    shipped = FALLBACK_CHECKPOINT if what == "checkpoint" else SHIPPED_DATASET
    if not shipped.startswith(f"{kind}-"):
        raise ConfigError(
            f"no {what} for target kind {kind!r} ships with MetaTune (the shipped one is "
            f"{shipped}): measure one with python collect.py run "
            f"target={kind}, then python train.py data_dir=data/<platform>")
    return shipped


def default_data_dir(target) -> str:
    """The dataset a target uses when none is named: its own platform's, else the shipped
    one of its kind.

    Raises:
        ConfigError: No dataset of the target's kind is here.
    """
    own = repo_path("data", platform_id(target))
    if os.path.isfile(os.path.join(own, "train", "meta.json")):
        return own
    return repo_path("data", _shipped_for(str(target.kind.name), "dataset"))


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


def default_xfer_data(target) -> str | list[str]:
    """The splits ``xgb-xfer`` pre-trains on when none are named: those the target's
    default MetaTune checkpoint (super graph) was trained on, so that both transfer from
    the same measurements; else the ``train`` split of :func:`default_data_dir`.

    Raises:
        ConfigError: No dataset of the target's kind is here.
    """
    try:
        splits = checkpoint_splits(default_checkpoint_for(target, "super"))
    except ConfigError:  # no checkpoint of this kind ships; a dataset still may
        splits = None
    if splits:
        return splits[0] if len(splits) == 1 else splits
    return os.path.join(default_data_dir(target), "train")


def default_checkpoint_for(target, graph: str) -> str:
    """The checkpoint a target's MetaTune cost model loads when none is named: its own
    platform's, else the shipped one of its kind.

    Args:
        target: A ``tvm.target.Target``.
        graph: ``super`` or ``plain``.

    Raises:
        ConfigError: No checkpoint of the target's kind ships with MetaTune.
    """
    return (own_checkpoint(target, graph)
            or default_checkpoint(_shipped_for(str(target.kind.name), "checkpoint"), graph=graph))


def collected_splits(data_dir: str) -> list[str]:
    """The splits collected in a dataset: its folders with a ``meta.json``, sorted."""
    path = repo_path(data_dir)
    if not os.path.isdir(path):
        return []
    return [d for d in sorted(os.listdir(path))
            if os.path.isfile(os.path.join(path, d, "meta.json"))]


def own_data(target) -> str | None:
    """The target's own platform's dataset (``data/<platform>``, relative to the
    repository) when any split of it has been collected here, else ``None``."""
    own = repo_path("data", platform_id(target))
    return repo_relative(own) if collected_splits(own) else None


def training_splits(data_dir: str) -> list[str]:
    """The training splits collected in a dataset (``train``, ``train-nhwc``,
    ``train-networks``, ...: :func:`collected_splits` named ``train*``), sorted."""
    return [d for d in collected_splits(data_dir) if d.startswith("train")]


def own_train_command(target, graph: str, loaded: str | None) -> str | None:
    """The command that trains the target CPU's own checkpoint from what is collected
    here, for a note when another CPU's checkpoint is loaded.

    With a generated ``train`` split the dataset trains alone; without one (network
    splits only, as collected first on a new CPU) it trains beside the splits the loaded
    checkpoint was trained on (``data.mixed_platforms``), as this repository's own
    checkpoints for such CPUs were made.

    Args:
        target: A ``tvm.target.Target``.
        graph: ``super`` or ``plain``.
        loaded: The checkpoint loaded instead (its ``.json`` names its splits), if any.

    Returns:
        ``python train.py ...``, or ``None`` when the target's dataset holds no training
        split (e.g. held-out splits only) or none is collected.
    """
    own = own_data(target)
    splits = training_splits(own) if own else []
    if not splits:
        return None
    if "train" in splits:
        named = "" if splits == ["train"] else f" 'data.splits=[{','.join(splits)}]'"
        return f"python train.py data_dir={own}{named} graph={graph}"
    base = (checkpoint_splits(loaded) or []) if loaded else []
    here = os.path.normpath(repo_path(own))
    others = [os.path.relpath(b, here) for b in base if os.path.dirname(b) != here]
    mixed = " data.mixed_platforms=true" if others else ""
    return (f"python train.py data_dir={own}{mixed} "
            f"'data.splits=[{','.join(others + splits)}]' graph={graph}")


def own_checkpoint(target, graph: str) -> str | None:
    """The target's own platform's checkpoint (``checkpoints/<platform>-<graph>.ckpt``),
    ``None`` when this repository has none."""
    own = default_checkpoint(platform_id(target), graph=graph)
    return own if os.path.isfile(own) else None
