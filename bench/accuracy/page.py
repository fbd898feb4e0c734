"""The accuracy comparison's markdown page, and the lines that describe its methods."""

from __future__ import annotations

#: What each built-in method is, on the page.
METHOD_NOTES = {
    "metatune-super": "GCN on the super-graph (meta-BO-T's model), head adapted on the k samples",
    "metatune-plain": "GCN on the plain graph (meta-BO's model), head adapted on the k samples",
    "xgb": "MetaSchedule XGBModel trained from scratch on the k samples (random at k=0)",
    "xgb-Xfer": "XGBModel pre-trained on the training split, refit on the k samples "
                "(AutoTVM-style discounted base margin)",
}

TITLES = {"mse": "MSE (lower is better)", "mse_d": "MSE(D), top 25 % (lower is better)",
          "pairwise": "Pairwise ranking accuracy (higher is better)",
          "top5_recall": "Top-5 recall (higher is better)"}


def describe(cfg) -> str:
    """One line on how a checkpoint adapts (its :class:`metatune.maml.AdaptConfig`)."""
    scope = {"head": "the head", "last_gcn": "the head and the last GCN layer",
             "all": "every layer"}.get(cfg.scope, cfg.scope)
    return f"{scope}, {cfg.steps} steps, lr {cfg.lr}, {cfg.loss} loss"


def scale(calibration: dict | None) -> str:
    """How a checkpoint's zero-shot scale was set (empty for none)."""
    if not calibration:
        return ""
    return (f"; zero-shot scale calibrated on {calibration['workloads']} validation workloads "
            f"(x {calibration['slope']:.3f} + {calibration['intercept']:.3f})")


def _where(doc: dict) -> str:
    """What the scored workloads are, by the split."""
    split = doc.get("split", "heldout")
    nets = ", ".join(doc.get("networks") or ["alexnet", "resnet-18", "vgg-16", "squeezenet"])
    if split.startswith("heldout"):
        return (f"{doc['workloads']} held-out workloads (conv tasks of {nets}"
                + (" in NHWC, as tune.py extracts them by default"
                   if split == "heldout-nhwc" else "")
                + "; never trained on)")
    if split.startswith("train-networks"):
        return (f"{doc['workloads']} conv tasks of {nets} in the other networks' split"
                + (" in NHWC" if split == "train-networks-nhwc" else "")
                + " (not in the held-out split: a validation fold to choose on; left out of "
                "training where a checkpoint was trained with data.leave_out_networks)")
    return (f"{doc['workloads']} validation workloads of the training split (the "
            "checkpoints'; not trained on, used to choose settings)")


def markdown(doc: dict) -> str:
    """The page of a run's JSON document (``python -m bench.model_accuracy``)."""
    lines = [f"# {doc['title']}", "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']}",
             f"- data: `{doc.get('data')}` (the runs were measured there, for "
             f"`{doc.get('target')}`; the accuracy itself is computed from the recorded "
             "run times)",
             *([f"- across platforms: xgb-Xfer's base model is trained on "
                f"`{doc['train_data']}`, not on this data, as are checkpoints trained "
                "there; every method adapts on this data's k samples"]
               if doc.get("train_data", doc.get("data")) != doc.get("data") else []),
             *([f"- xgb-Xfer's base model trains on the splits "
                f"{', '.join(f'`{sp}`' for sp in doc['xfer_splits'])} of `{doc['train_data']}`"
                " (the checkpoints' training data)"]
               if doc.get("xfer_splits", ["train"]) != ["train"] else []),
             f"- {_where(doc)}, query {doc['query']} candidates each, "
             f"seeds {doc['seeds']}; support = k other measured candidates",
             "- targets: throughput relative to the best support candidate (the workload's "
             "best at k = 0); each cell: mean over workloads, median over seeds "
             "(min-max in brackets)", "",
             "Methods:", ""]
    lines += [f"- `{m}`: {doc['notes'].get(m) or METHOD_NOTES[m]}" for m in doc["summary"]]
    ks = list(next(iter(doc["summary"].values())))
    for metric, title in TITLES.items():
        lines += ["", f"## {title}", "", "| method | " + " | ".join(f"k={k}" for k in ks) + " |",
                  "|---|" + "---|" * len(ks)]
        for method, per_k in doc["summary"].items():
            cells = [f"{per_k[k][metric]['median']:.3f} "
                     f"({per_k[k][metric]['min']:.3f}-{per_k[k][metric]['max']:.3f})"
                     for k in ks]
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
