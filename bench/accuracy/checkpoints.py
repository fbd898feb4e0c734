"""Which workloads the checkpoints are scored on: the data's own target, a held-out
split's workloads of some networks, the checkpoints' validation workloads, and a refusal
to score a checkpoint on workloads it was trained on."""

from __future__ import annotations

import json
import os

from bench.common import REPO


def data_target(split_dir: str) -> str:
    """The target a split was measured for, as ``resolve_target`` takes it (``llvm``, this
    machine, when its ``meta.json`` does not say)."""
    from tuner.engine.platforms import dataset_target

    spec = dataset_target(split_dir)
    if not spec:
        return "llvm"
    keep = ("kind", "mcpu", "mtriple", "mattr", "arch", "num-cores")
    return json.dumps({k: spec[k] for k in keep if k in spec})


def network_workloads(split_dir: str, networks: list[str]) -> list[str]:
    """The workloads of a held-out split that belong to any of ``networks`` (``meta.json``'s
    ``networks`` of each entry).

    Raises:
        SystemExit: A network the split has no workload of (the message lists them).
    """
    from metatune import dataset

    names, known = dataset.network_workloads([split_dir], networks)
    unknown = sorted(set(networks) - set(known))
    if unknown:
        raise SystemExit(f"--networks {' '.join(unknown)}: {split_dir} has no workload of "
                         f"{'it' if len(unknown) == 1 else 'them'}; its networks: "
                         f"{', '.join(known) or 'none'}")
    return names


def validation_workloads(checkpoints: list[str], data: str,
                         why: str = "--split val") -> tuple[list[str], list[str]]:
    """The validation workloads the checkpoints were trained beside (their ``.json``
    sidecars), which must agree and come from ``data``, and the training splits of ``data``
    they were drawn from (``train`` for a sidecar that names none).

    Args:
        checkpoints: The checkpoints' paths.
        data: The dataset they should have been trained on (relative: to the repository).
        why: What needs them (the start of an error message).

    Raises:
        SystemExit: A sidecar is unreadable, names no validation workload, another dataset,
            or other workloads or splits than the first checkpoint's.
    """
    from metatune.provenance import sidecar_path
    from tuner.engine.platforms import checkpoint_data

    names: list[str] | None = None
    splits: list[str] | None = None
    for checkpoint in checkpoints:
        sidecar = sidecar_path(checkpoint)
        try:
            meta = checkpoint_data(checkpoint)
            found, trained_on = list(meta["val_workloads"]), meta["dir"]
            found_splits = list(meta.get("splits") or ["train"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"{why}: cannot read the validation workloads of "
                             f"{checkpoint} from {sidecar} ({err}); train it with train.py, "
                             "which writes it") from err
        here = os.path.relpath(os.path.join(REPO, data), REPO)
        if os.path.normpath(trained_on) != os.path.normpath(here):
            raise SystemExit(f"{why}: {checkpoint} was trained on {trained_on}, not "
                             f"--data {data}: its validation workloads are {trained_on}'s")
        if not found:
            raise SystemExit(f"{why}: {checkpoint} was trained without validation "
                             "workloads (data.val_fraction=0)")
        if names is not None and (sorted(found) != sorted(names) or found_splits != splits):
            raise SystemExit(f"{why}: {checkpoint} has other validation workloads or "
                             f"splits than {checkpoints[0]}: train both with the same seed, "
                             "data and data.splits")
        names = found if names is None else names
        splits = found_splits if splits is None else splits
    return names or [], splits or ["train"]


def refuse_trained_on(checkpoints: list[str], names: list[str],
                      allow: bool = False) -> dict[str, int]:
    """Refuse to score a checkpoint on workloads it was trained on (by its ``.json``
    sidecar's ``train_workloads``; a checkpoint without one is not checked).

    Args:
        checkpoints: The checkpoints' paths.
        names: The scored workloads' names.
        allow: Count them instead of refusing (``--seen-ok``).

    Returns:
        How many of ``names`` each checkpoint (by path) was trained on, where any.

    Raises:
        SystemExit: Without ``allow``, a checkpoint trained on some of ``names`` (the
            message says how to leave them out).
    """
    from tuner.engine.platforms import checkpoint_data

    counts = {}
    for checkpoint in checkpoints:
        try:
            trained = set(checkpoint_data(checkpoint)["train_workloads"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        seen = sorted(trained.intersection(names))
        if seen and not allow:
            raise SystemExit(f"{checkpoint} was trained on {len(seen)} of the scored "
                             f"workloads (e.g. {seen[0]}): score it on others, train it "
                             "without them (train.py data.leave_out_networks=[...]), or, "
                             "to choose among checkpoints on a training split, --seen-ok")
        if seen:
            counts[checkpoint] = len(seen)
    return counts
