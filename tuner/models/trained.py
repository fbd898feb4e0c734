"""A trained MetaTune cost network as the tuner loads it: the network, the adaptation it was
meta-trained for and where its training data was measured (:class:`TrainedModel`), read
from a ``train.py`` checkpoint by :func:`load_model` (plain ``torch.load`` through
:mod:`metatune.checkpoint`, no Lightning) and checked against the graphs the tuner encodes
(:func:`check_compatible`); or a fresh one, learning online only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from metatune.checkpoint import load as load_checkpoint
from metatune.config import target_dict
from metatune.errors import CheckpointError
from metatune.graph import FEATURE_VERSION, NODE_FEATURES
from metatune.maml import AdaptConfig, InnerLoop
from metatune.model import MetaTuneNet
from tuner.models.params import MetaTuneModelConfig


@dataclass
class TrainedModel:
    """A cost network and the adaptation it was meta-trained for.

    Attributes:
        net: The :class:`metatune.model.MetaTuneNet` (eval mode and frozen when loaded
            from a checkpoint).
        inner: The :class:`metatune.maml.InnerLoop` (scope, steps, step sizes, loss).
        graph: The graph mode it was trained on.
        platform: Where its training data was measured (the checkpoint's ``platform``).
        calibration: The zero-shot scale folded into its head
            (:class:`metatune.calibration.ScaleCalibration` fields), ``None`` if none.
    """

    net: MetaTuneNet
    inner: InnerLoop
    graph: str
    platform: dict = field(default_factory=dict)
    calibration: dict | None = None

    def trained_cpus(self) -> list[str]:
        """The ``mcpu`` of every platform the training data was measured for."""
        mixed = self.platform.get("mixed") or []
        cpus = [_mcpu_of(p.get("target")) for p in mixed] or [_mcpu_of(self.platform.get("target"))]
        return [c for c in dict.fromkeys(cpus) if c]

    def layouts(self) -> list[str]:
        """The data layouts of the training data's convolutions (``NCHW`` for checkpoints
        that record none: every one trained before layouts were recorded was NCHW only)."""
        return list(self.platform.get("layouts") or ["NCHW"])

    def layout_note(self, layout: str) -> str | None:
        """A note when the tasks are extracted in a data layout (``NCHW``, ``NHWC``) that
        none of the training data's convolutions were measured in, else ``None``."""
        if layout in self.layouts():
            return None
        split = "train-networks" + ("-nhwc" if layout == "NHWC" else "")
        return (f"the cost model was trained on {'/'.join(self.layouts())} convolutions only "
                f"and this run tunes them in {layout} (layout={layout}); it adapts online, "
                f"but for a model trained on {layout} too, collect this CPU's {layout} "
                f"network convs (python collect.py run 'splits=[{split}]') and train with "
                f"them (data.splits=[...,{split}]; checkpoints/README.md)")

    def covers(self, target) -> bool:
        """Whether some of the training data was measured for ``target``'s CPU."""
        mcpu = _target_mcpu(target)
        return bool(mcpu) and mcpu in self.trained_cpus()

    def platform_note(self, target, own_checkpoint: str | None = None,
                      train_command: str | None = None) -> str | None:
        """A note when the training data was measured for another CPU than ``target``'s,
        or for several (the checkpoint still works: its ranking transfers, and it
        fine-tunes online).

        Args:
            target: The ``tvm.target.Target`` tuned for.
            own_checkpoint: The target CPU's own checkpoint, when there is one and another
                was loaded: the note points to it instead of advising to train one.
            train_command: The command that trains the target CPU's checkpoint of this
                graph mode from data collected here, when there is such data but no such
                checkpoint (:func:`tuner.app.checkpoints.own_train_command`): the note
                gives it.
        """
        trained = _mcpu_of(self.platform.get("target"))
        mcpu = _target_mcpu(target)
        mixed = self.platform.get("mixed") or []
        if own_checkpoint:
            advice = (f"this CPU's own checkpoint is {own_checkpoint} (loaded when "
                      "metatune.checkpoint is left unset)")
        elif train_command:
            advice = (f"this CPU's training data is collected here: train its "
                      f"{self.graph}-graph checkpoint with {train_command} (README, Dataset "
                      "and training)")
        else:
            advice = ("for a checkpoint of this CPU, collect its data (python collect.py run) "
                      "and train on it")
        if mixed:  # trained across platforms on purpose (data.mixed_platforms)
            parts = ", ".join(f"{p.get('split')} for -mcpu={_mcpu_of(p.get('target'))}"
                              for p in mixed)
            note = (f"the cost model was trained on data of several CPUs ({parts}); tuning "
                    f"for -mcpu={mcpu or '?'} (it adapts online to this one)")
            return note if self.covers(target) or not mcpu else f"{note}; {advice}"
        if not trained or not mcpu or trained == mcpu:
            return None
        return (f"the cost model was trained on data measured for -mcpu={trained} "
                f"({self.platform.get('cpu')}); tuning for -mcpu={mcpu} transfers it across "
                f"CPUs (it still adapts online); {advice}")


def _target_mcpu(target) -> str:
    """The ``mcpu`` of a ``tvm.target.Target`` (``""`` if it has none)."""
    return str(target.attrs.get("mcpu", "")) if hasattr(target, "attrs") else ""


def _mcpu_of(target: str | None) -> str | None:
    """The ``mcpu`` of a target given as TVM's JSON text (``None`` if it has none)."""
    return (target_dict(target) or {}).get("mcpu")


def load_model(checkpoint: str | None, *, graph: str | None = MetaTuneModelConfig.graph,
               from_scratch: bool = False, hidden: int = 64,
               adapt: AdaptConfig | None = None) -> TrainedModel:
    """The cost network and its adaptation from a ``train.py`` checkpoint, or fresh ones.

    Args:
        checkpoint: A ``train.py`` checkpoint (``MetaModule``).
        graph: The graph mode the caller encodes candidates with; the checkpoint must have
            been trained on it (``None``: whichever it was trained on).
        from_scratch: Start from random weights instead (no checkpoint needed).
        hidden: Width of a fresh network.
        adapt: How a fresh network adapts (default :class:`metatune.maml.AdaptConfig`).

    Raises:
        CheckpointError: The checkpoint is missing or cannot be loaded, or was trained with
            another graph mode or another version of the graph features.
    """
    if from_scratch:
        net = MetaTuneNet(NODE_FEATURES, hidden, 2, hidden)
        return TrainedModel(net, InnerLoop(net, adapt or AdaptConfig()),
                            graph or MetaTuneModelConfig.graph)
    if not checkpoint or not os.path.isfile(checkpoint):
        raise CheckpointError(
            f"cost-model checkpoint {checkpoint!r} not found: train one with python train.py, "
            "pass its path (metatune.checkpoint=PATH), or start the model from scratch "
            "(metatune.from_scratch=true)")
    try:  # plain torch.load of the weights: Lightning stays out of the tuner's start-up
        net, inner, hparams = load_checkpoint(checkpoint)
    except CheckpointError as err:
        raise CheckpointError(f"{err}, or start the model from scratch "
                              "(metatune.from_scratch=true)") from err
    check_compatible(checkpoint, hparams, graph or hparams.get("graph"))
    for p in [*net.parameters(), *inner.parameters()]:
        p.requires_grad_(False)  # adapted through fast weights, never trained in place
    return TrainedModel(net, inner, hparams["graph"], dict(hparams.get("platform") or {}),
                        hparams.get("calibration"))


def check_compatible(checkpoint: str, hparams: dict, graph: str) -> None:
    """Refuse a checkpoint trained on other graphs than the caller will encode.

    Raises:
        CheckpointError: Another graph mode, or another (or no recorded) feature version.
    """
    trained = hparams.get("graph")
    if trained != graph:
        raise CheckpointError(
            f"checkpoint {checkpoint!r} was trained on {trained or 'unrecorded'} graphs, not "
            f"{graph}: pass metatune.graph={trained} (or the preset that uses it), or a "
            f"checkpoint trained with python train.py graph={graph}")
    version = hparams.get("feature_version")
    if version != FEATURE_VERSION:
        raise CheckpointError(
            f"checkpoint {checkpoint!r} was trained on graph features version {version}, "
            f"this MetaTune encodes version {FEATURE_VERSION}: retrain it with python train.py")


def load_net(checkpoint: str | None, *, graph: str = MetaTuneModelConfig.graph,
             from_scratch: bool = False, hidden: int = 64) -> MetaTuneNet:
    """Only the network of :func:`load_model` (for callers that do not adapt)."""
    return load_model(checkpoint, graph=graph, from_scratch=from_scratch, hidden=hidden).net
