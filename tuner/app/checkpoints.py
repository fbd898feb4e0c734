"""Which checkpoint and dataset a target uses when none is named: the policy.

A target uses its own platform's dataset and checkpoint (``data/<platform>``,
``checkpoints/<platform>-<graph>.ckpt``; :func:`tuner.engine.platforms.platform_id`) when
this repository has them, and the shipped ones of the same target kind otherwise: the
fallback pair :data:`metatune.config.FALLBACK_CHECKPOINT` (a checkpoint trained on other
CPUs still ranks another's schedules, and adapts online) and the dataset
:data:`metatune.config.SHIPPED_DATASET`. The run says in one line which checkpoint it
took and why (:func:`checkpoint_note`); loading another CPU's says so too
(:meth:`tuner.models.trained.TrainedModel.platform_note`), with the command that trains
this CPU's own from what is collected here (:func:`own_train_command`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from metatune.config import (
    FALLBACK_CHECKPOINT,
    SHIPPED_DATASET,
    default_checkpoint,
    repo_path,
    repo_relative,
)
from metatune.errors import ConfigError
from tuner.engine.platforms import checkpoint_data, checkpoint_splits, platform_id

#: Why a checkpoint was taken (:class:`CheckpointChoice`).
NAMED, OWN, FALLBACK = "named", "own", "fallback"


@dataclass(frozen=True)
class CheckpointChoice:
    """The checkpoint a MetaTune cost model loads, and why that one.

    Attributes:
        path: The checkpoint.
        why: ``"named"`` (``metatune.checkpoint`` / ``--checkpoint``), ``"own"`` (the
            target CPU's own) or ``"fallback"`` (no checkpoint of this CPU here: the
            shipped pair of its kind).
        platform: The target's platform, e.g. ``"llvm-znver5"``.
    """

    path: str
    why: str
    platform: str

    def line(self) -> str:
        """One line for the log, e.g. ``checkpoint: checkpoints/llvm-znver4-super.ckpt (no
        checkpoint of this CPU, znver5; the fallback pair, trained on ... data)``."""
        cpu = self.platform.partition("-")[2] or self.platform
        if self.why == NAMED:
            why = "named: metatune.checkpoint / --checkpoint"
        elif self.why == OWN:
            why = f"this CPU's own, {cpu}"
        else:
            trained = trained_on(self.path)
            why = (f"no checkpoint of this CPU, {cpu}; the fallback pair"
                   + (f", trained on {trained} data" if trained else ""))
        return f"checkpoint: {repo_relative(self.path)} ({why})"


def trained_on(checkpoint: str) -> str | None:
    """The CPUs whose data a checkpoint was trained on, from the ``.json`` beside it, e.g.
    ``"icelake-server, rocketlake and znver4"``; ``None`` when it has no readable one."""
    try:
        data = checkpoint_data(checkpoint)
        dirs = [os.path.dirname(os.path.normpath(os.path.join(data["dir"], s)))
                for s in (data.get("splits") or ["train"])]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    cpus = list(dict.fromkeys(os.path.basename(d).partition("-")[2] or os.path.basename(d)
                              for d in dirs))
    return cpus[0] if len(cpus) == 1 else f"{', '.join(cpus[:-1])} and {cpus[-1]}"


def _shipped_for(kind: str, what: str) -> str:
    """The platform whose dataset (``what="dataset"``) or checkpoint a target of kind
    ``kind`` without its own uses, if it is of that kind.

    Raises:
        ConfigError: Nothing of that kind ships with MetaTune.
    """
    shipped = FALLBACK_CHECKPOINT if what == "checkpoint" else SHIPPED_DATASET
    if not shipped.startswith(f"{kind}-"):
        raise ConfigError(
            f"no {what} for target kind {kind!r} ships with MetaTune (the shipped one is "
            f"{shipped}): measure one with python collect.py run "
            f"target={kind}, then python train.py data_dir=data/<platform>")
    return shipped


def choose_checkpoint(target, graph: str, named: str | None = None) -> CheckpointChoice:
    """The checkpoint a target's MetaTune cost model loads: the one named, else its own
    platform's, else the shipped one of its kind.

    Args:
        target: A ``tvm.target.Target``.
        graph: ``super`` or ``plain``.
        named: ``metatune.checkpoint``, if set.

    Raises:
        ConfigError: None named, none of this CPU, and no checkpoint of the target's kind
            ships with MetaTune.
    """
    platform = platform_id(target)
    if named:
        return CheckpointChoice(named, NAMED, platform)
    own = own_checkpoint(target, graph)
    if own:
        return CheckpointChoice(own, OWN, platform)
    shipped = _shipped_for(str(target.kind.name), "checkpoint")
    return CheckpointChoice(default_checkpoint(shipped, graph=graph), FALLBACK, platform)


def default_checkpoint_for(target, graph: str) -> str:
    """The checkpoint a target's MetaTune cost model loads when none is named
    (:func:`choose_checkpoint`'s path).

    Raises:
        ConfigError: No checkpoint of the target's kind ships with MetaTune.
    """
    return choose_checkpoint(target, graph).path


def checkpoint_note(cost_model: str, metatune, target) -> str | None:
    """The log line that says which checkpoint a run's cost model loads and why, ``None``
    for another cost model or one from scratch.

    Args:
        cost_model: The run's ``cost_model``.
        metatune: Its ``metatune`` section (:class:`tuner.models.params.MetaTuneModelConfig`)
            before the defaults are filled in (a checkpoint set here was named).
        target: The ``tvm.target.Target`` tuned for.
    """
    if cost_model != "metatune" or metatune.from_scratch:
        return None
    return choose_checkpoint(target, metatune.graph, metatune.checkpoint).line()


def own_checkpoint(target, graph: str) -> str | None:
    """The target's own platform's checkpoint (``checkpoints/<platform>-<graph>.ckpt``),
    ``None`` when this repository has none."""
    own = default_checkpoint(platform_id(target), graph=graph)
    return own if os.path.isfile(own) else None


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
