"""Options retired from MetaTune: each was measured no better than the default and was off
by default. A configuration (YAML or ``key=value``) that still sets one is refused with
the reason; a checkpoint that stored one at its off value still loads (the setting is
dropped), one trained with it on is refused (:func:`check_stored`).

The code of every retired option is in commit :data:`LAST_COMMIT` (``git show
da885ad:<path>``), or the one :data:`RETIRED_AT` names for it; the measurements are on
the pages named here.
"""

from __future__ import annotations

from typing import Any, Mapping

from metatune.errors import CheckpointError

#: The last commit that had the retired options.
LAST_COMMIT = "da885ad"

#: Retired configuration keys (as a dotlist names them) -> why they went.
RETIRED_KEYS: dict[str, str] = {
    "metatune.compiled_correction": (
        "the compiled-code correction tuned no better (0.991x best latency on six held-out "
        "convs at 1.46x the tuning time, docs/lab/tuning/compiled-correction-tuning.md; "
        "1.073x on alexnet, docs/lab/tuning/network-ab-compiled-alexnet.md)"),
    "metatune.compiled_top": ("it sized the compiled-code correction, retired with it "
                              "(docs/lab/tuning/compiled-correction-tuning.md)"),
    "metatune.blend_k0": (
        "blending with a task-local XGBoost tuned no better (1.045x after 32 trials, no "
        "consistent gain over four seeds, docs/lab/tuning/blend-tuning.md)"),
    "metatune.adapt_scope": (
        "adapting the last GCN layer or the whole GCN online ranked the next pool no better "
        "than the head (docs/lab/search/adapt-in-tuning-val.md, adapt-in-tuning-val2.md)"),
    "search_params.bo.kernel": (
        "the GP kernel over knobs and the prediction (knobs+prior) ranked no better than "
        "knobs alone (pairwise 0.639-0.659 against 0.641-0.663, "
        "docs/lab/cost-model/gp-kernel-val.md); the GP compares knob vectors"),
    "meta.zero_shot_weight": (
        "the zero-shot term in the meta-objective tuned no better (1.029x best latency, "
        "docs/lab/tuning/zero-shot-tuning.md)"),
    "meta.adapt.context": (
        "in-context adaptation (a support-set attention) ranked held-out convs no better "
        "(pairwise 0.642 against 0.664 at k = 8, docs/lab/cost-model/context-heldout.md)"),
    "meta.adapt.meta_sgd": (
        "Meta-SGD's learned step sizes ranked held-out convs no better (pairwise "
        "0.648-0.652 against 0.652-0.657, docs/lab/cost-model/model-accuracy-ablations.md)"),
    "search_params.refine": (
        "local refinement around each task's best tuned no better on held-out tasks (1.026x "
        "the default's best after 128 trials, better in 1 of 6 pairs, "
        "docs/lab/search/refine-heldout.md; 0.973x on validation tasks, refine-ab.md)"),
    "pretrain.top_weight": (
        "pre-training weighted towards the good candidates ranked worse (pairwise 0.801 "
        "against 0.815 at k = 0, docs/lab/cost-model/top-weight-val-znver4.md)"),
}

#: Retired keys whose code is in a later commit than :data:`LAST_COMMIT`.
RETIRED_AT: dict[str, str] = {"search_params.refine": "a80c5f9"}


def _retired_key(key: str) -> str | None:
    """The retired key ``key`` is, or is under (``search_params.refine.enabled``)."""
    for retired in RETIRED_KEYS:
        if key == retired or key.startswith(retired + "."):
            return retired
    return None


#: Adaptation losses retired (``meta.adapt.loss``, ``pretrain.loss``) -> why they went.
RETIRED_LOSSES: dict[str, str] = {
    loss: ("chosen against on the validation workloads: mse+rank ranked best by the "
           "ablation's rule (docs/lab/cost-model/adaptation-ablation-val.md, "
           "adaptation-ablation-listwise-val.md)")
    for loss in ("rank", "list", "mse+list")
}

#: Retired settings a checkpoint may store, at the value that meant "off": under the
#: ``adapt`` settings, and at the top of its hyper-parameters.
RETIRED_ADAPT: dict[str, Any] = {"context": 0, "meta_sgd": False}
RETIRED_HPARAMS: dict[str, Any] = {"zero_shot_weight": 0.0}


def retired_message(key: str | None) -> str | None:
    """Why the configuration key ``key`` (dotted) is refused, if it is a retired one."""
    retired = _retired_key(key) if key else None
    if retired is None:
        return None
    return (f"{key} is retired: {RETIRED_KEYS[retired]}; drop it from the configuration "
            f"(the code is in commit {RETIRED_AT.get(retired, LAST_COMMIT)})")


def loss_message(loss: str) -> str | None:
    """Why the adaptation loss ``loss`` is refused, if it is a retired one."""
    if loss not in RETIRED_LOSSES:
        return None
    return (f"loss {loss!r} is retired ({RETIRED_LOSSES[loss]}); use mse+rank or mse "
            f"(the code is in commit {LAST_COMMIT})")


def check_stored(settings: Mapping[str, Any], retired: Mapping[str, Any], where: str,
                 key_prefix: str) -> dict[str, Any]:
    """``settings`` without the retired ones stored at their off value.

    Args:
        settings: A checkpoint's stored settings (its ``adapt`` dict or hyper-parameters).
        retired: Name -> off value (:data:`RETIRED_ADAPT` or :data:`RETIRED_HPARAMS`).
        where: The checkpoint, for the message.
        key_prefix: How the configuration named these settings (``meta.adapt.``, ``meta.``).

    Raises:
        CheckpointError: A retired setting stored on (not at its off value).
    """
    out = dict(settings)
    for name, off in retired.items():
        if name not in out:
            continue
        value = out.pop(name)
        if value != off and value is not None:
            why = RETIRED_KEYS.get(key_prefix + name, "retired")
            raise CheckpointError(
                f"checkpoint {where!r} was trained with {key_prefix}{name}={value}, an option "
                f"retired from MetaTune ({why}): retrain it without it (python train.py), or "
                f"use it with commit {LAST_COMMIT}")
    return out
