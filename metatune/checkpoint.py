"""Read a ``train.py`` checkpoint as plain PyTorch: the network, its adaptation, settings.

A checkpoint is the file Lightning writes for :class:`lightning_modules.meta.MetaModule`
(``hyper_parameters`` and a ``state_dict`` of ``net.*`` and ``inner.*`` tensors). The
tuner only needs those two entries, so it reads them with ``torch.load`` (tensors and
plain containers only, ``weights_only=True``) instead of importing Lightning: 1.49 s
against 3.23 s in a fresh process (``docs/lab/compile/checkpoint-load.md``). :func:`build` is
the one place that turns the settings into modules, for the Lightning module and for
this reader.
"""

from __future__ import annotations

from typing import Any

import torch

from metatune.errors import CheckpointError
from metatune.maml import AdaptConfig, InnerLoop
from metatune.model import MetaTuneNet
from metatune.retired import RETIRED_ADAPT, RETIRED_HPARAMS, check_stored
from metatune.safe_load import load_tensors

#: What to do about a checkpoint that cannot be used.
ADVICE = "retrain it with python train.py"
#: The network's shape where a checkpoint's settings leave it out (MetaModule's defaults).
SHAPE_DEFAULTS = {"hidden": 64, "gcn_layers": 2, "head_hidden": 64}


def adapt_settings(adapt: dict[str, Any] | None, alpha: float | None = None,
                   inner_steps: int | None = None, where: str = "?") -> AdaptConfig:
    """The adaptation a checkpoint was meta-trained for.

    Args:
        adapt: The saved ``adapt`` settings (:class:`AdaptConfig` fields; retired ones
            at their off value are dropped, :data:`metatune.retired.RETIRED_ADAPT`).
        alpha, inner_steps: Older checkpoints' names of ``adapt["lr"]`` and
            ``adapt["steps"]``, read when ``adapt`` is absent.
        where: The checkpoint, for the message about a retired setting.

    Returns:
        The :class:`AdaptConfig` (its defaults for what neither gives).

    Raises:
        CheckpointError: A retired setting stored on (e.g. Meta-SGD).
        metatune.errors.ConfigError: A setting out of range or a retired loss;
            TypeError: an unknown setting.
    """
    if adapt is None:  # a checkpoint from before the adapt settings existed
        legacy = {"lr": alpha, "steps": inner_steps}
        adapt = {k: v for k, v in legacy.items() if v is not None}
    return AdaptConfig(**check_stored(adapt, RETIRED_ADAPT, where, "meta.adapt."))


def retired_hparams(hparams: dict[str, Any], where: str = "?") -> dict[str, Any]:
    """A checkpoint's settings without the retired ones stored at their off value
    (:data:`metatune.retired.RETIRED_HPARAMS`, e.g. ``zero_shot_weight=0``).

    Raises:
        CheckpointError: A retired setting stored on.
    """
    return check_stored(hparams, RETIRED_HPARAMS, where, "meta.")


def build(hparams: dict[str, Any], where: str = "?") -> tuple[MetaTuneNet, InnerLoop]:
    """A fresh network and inner loop of the shape and adaptation ``hparams`` describe.

    Args:
        hparams: ``in_features`` and optionally ``hidden``, ``gcn_layers``,
            ``head_hidden`` (:data:`SHAPE_DEFAULTS`), ``adapt`` (or the older ``alpha`` /
            ``inner_steps``), as :class:`lightning_modules.meta.MetaModule` saves them.
        where: The checkpoint they come from, for messages.

    Returns:
        ``(net, inner)`` with random weights.

    Raises:
        CheckpointError: A retired adaptation setting stored on.
    """
    shape = {k: hparams.get(k, v) for k, v in SHAPE_DEFAULTS.items()}
    net = MetaTuneNet(hparams["in_features"], shape["hidden"], shape["gcn_layers"],
                      shape["head_hidden"])
    adapt = adapt_settings(hparams.get("adapt"), hparams.get("alpha"),
                           hparams.get("inner_steps"), where)
    return net, InnerLoop(net, adapt)


def _reason(err: Exception) -> str:
    """One line of an exception: torch puts the cause of a refused or mismatched load on
    a later line than its first (``Unsupported global``, ``size mismatch``); a refused
    load is worded by :func:`metatune.safe_load.load_error` (never torch's advice)."""
    from metatune.safe_load import load_error, refused

    if refused(err):
        return load_error(err)
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    key = next((line for line in lines if "Unsupported global" in line
                or "size mismatch" in line or "key(s)" in line), lines[0] if lines else "")
    return f"{type(err).__name__}: {key[:200]}"


def read(path: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The saved settings and weights of a ``train.py`` checkpoint.

    Args:
        path: The checkpoint file.

    Returns:
        ``(hparams, state_dict)``: the keys of ``state_dict`` start with ``net.`` or
        ``inner.``.

    Raises:
        CheckpointError: The file cannot be read as a checkpoint (corrupt, truncated,
            not a ``train.py`` checkpoint, or holding more than tensors and plain data).
    """
    try:
        blob = load_tensors(path)  # weights_only=True: nothing in it runs
        hparams, state = dict(blob["hyper_parameters"]), dict(blob["state_dict"])
    except Exception as err:  # torch raises many types on a bad file
        raise CheckpointError(f"cannot read checkpoint {path!r} ({_reason(err)}); "
                              f"{ADVICE}") from err
    return hparams, state


def load(path: str) -> tuple[MetaTuneNet, InnerLoop, dict[str, Any]]:
    """The trained network (eval mode) and inner loop of a ``train.py`` checkpoint.

    Args:
        path: The checkpoint file.

    Returns:
        ``(net, inner, hparams)``.

    Raises:
        CheckpointError: The file cannot be read, its settings are not understood or name
            a retired option turned on, or its weights do not fit the network its settings
            describe.
    """
    hparams, state = read(path)
    try:
        hparams = retired_hparams(hparams, path)
        net, inner = build(hparams, path)
    except CheckpointError:
        raise
    except Exception as err:  # a missing shape, an unknown or out-of-range setting
        raise CheckpointError(f"checkpoint {path!r} has settings this MetaTune does not "
                              f"understand ({_reason(err)}); {ADVICE}") from err
    stray = sorted(k for k in state if not k.startswith(("net.", "inner.")))
    try:
        if stray:
            raise KeyError(f"unexpected key(s) {', '.join(stray[:5])}")
        for prefix, module in (("net.", net), ("inner.", inner)):
            module.load_state_dict({k[len(prefix):]: v for k, v in state.items()
                                    if k.startswith(prefix)})
    except Exception as err:  # missing or unexpected keys, wrong shapes
        raise CheckpointError(f"the weights in checkpoint {path!r} do not fit the network "
                              f"its settings describe ({_reason(err)}); {ADVICE}") from err
    return net.eval(), inner, hparams
