"""Read a ``train.py`` checkpoint as plain PyTorch: the network, its adaptation, settings.

A checkpoint is the file Lightning writes for :class:`lightning_modules.meta.MetaModule`
(``hyper_parameters`` and a ``state_dict`` of ``net.*`` and ``inner.*`` tensors). The
tuner only needs those two entries, so it reads them with ``torch.load`` (tensors and
plain containers only, ``weights_only=True``) instead of importing Lightning, which
cost about 4 s of ``tune.py``'s start-up (``docs/STATUS.md``). :func:`build` is the one
place that turns the settings into modules, for the Lightning module and for this reader.
"""

from __future__ import annotations

from typing import Any

import torch

from metatune.errors import CheckpointError
from metatune.maml import AdaptConfig, InnerLoop
from metatune.model import MetaTuneNet

def adapt_settings(adapt: dict[str, Any] | None, alpha: float | None = None,
                   inner_steps: int | None = None) -> AdaptConfig:
    """The adaptation a checkpoint was meta-trained for.

    Args:
        adapt: The saved ``adapt`` settings (:class:`AdaptConfig` fields).
        alpha, inner_steps: Older checkpoints' names of ``adapt["lr"]`` and
            ``adapt["steps"]``, read when ``adapt`` is absent.
    """
    if adapt is None:  # a checkpoint from before the adapt settings existed
        legacy = {"lr": alpha, "steps": inner_steps}
        adapt = {k: v for k, v in legacy.items() if v is not None}
    return AdaptConfig(**adapt)


def build(hparams: dict[str, Any]) -> tuple[MetaTuneNet, InnerLoop]:
    """A fresh network and inner loop of the shape and adaptation ``hparams`` describe.

    Args:
        hparams: ``in_features`` and optionally ``hidden``, ``gcn_layers``,
            ``head_hidden``, ``adapt`` (or the older ``alpha`` / ``inner_steps``), as
            :class:`lightning_modules.meta.MetaModule` saves them.

    Returns:
        ``(net, inner)`` with random weights.
    """
    net = MetaTuneNet(hparams["in_features"], hparams.get("hidden", 64),
                      hparams.get("gcn_layers", 2), hparams.get("head_hidden", 64))
    adapt = adapt_settings(hparams.get("adapt"), hparams.get("alpha"),
                           hparams.get("inner_steps"))
    return net, InnerLoop(net, adapt)


def read(path: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The saved settings and weights of a ``train.py`` checkpoint.

    Returns:
        ``(hparams, state_dict)``: the keys of ``state_dict`` start with ``net.`` or
        ``inner.``.

    Raises:
        CheckpointError: The file cannot be read as a checkpoint (corrupt, truncated,
            not a ``train.py`` checkpoint, or holding more than tensors and plain data).
    """
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        hparams, state = dict(blob["hyper_parameters"]), dict(blob["state_dict"])
    except Exception as err:  # torch raises many types on a bad file
        raise CheckpointError(f"{type(err).__name__}: "
                              f"{(str(err).strip().splitlines() or [''])[0][:160]}") from err
    return hparams, state


def load(path: str) -> tuple[MetaTuneNet, InnerLoop, dict[str, Any]]:
    """The trained network (eval mode) and inner loop of a ``train.py`` checkpoint.

    Returns:
        ``(net, inner, hparams)``.

    Raises:
        CheckpointError: The file cannot be read, or its weights do not fit the
            network its settings describe.
    """
    hparams, state = read(path)
    try:
        net, inner = build(hparams)
        for prefix, module in (("net.", net), ("inner.", inner)):
            module.load_state_dict({k[len(prefix):]: v for k, v in state.items()
                                    if k.startswith(prefix)})
    except Exception as err:  # missing keys, wrong shapes, unknown settings
        detail = " ".join(str(err).split())  # torch lists the mismatches on later lines
        raise CheckpointError(f"its weights do not fit the network its settings describe "
                              f"({type(err).__name__}: {detail[:200]})") from err
    return net.eval(), inner, hparams
