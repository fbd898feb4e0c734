# Last ran on commit 74d29e4
"""Which adaptation makes the cost model learn from a task's own measurements (issue 13).

Pre-trains once, meta-trains every variant from that same pre-trained network (``train.py``
with ``pretrained=``), then measures them all with :mod:`model_accuracy`, twice:

1. on the checkpoints' validation workloads (of the training split, not trained on) at
   k = 0, 8, 16, 32 (query 24 of their 64 samples): the winner, the best mean rank over the
   four metrics (:func:`choose`), is chosen here
   (``<out>-val.{md,json}``), never on the tasks it is reported on;
2. on the held-out network convolutions at k = 0, 8, 16, 32, 64, beside ``xgb`` and
   ``xgb-Xfer``, over the same query sets and seeds (``<out>.{md,json}``).

Each variant is adapted at evaluation exactly as it was meta-trained to (the settings stored
in its checkpoint), which is also how the tuner fine-tunes it online.

Variants (train config overrides; each names its loss and its episodes, so the list does
not change with the defaults):

- ``pretrain-only``: no meta-training; the pre-trained head adapts (5 steps, MSE);
- ``maml``: MAML on the head, 5 MSE steps, 5-way tasks (the v1 checkpoints' recipe);
- ``maml-last-gcn`` / ``maml-all``: the last GCN layer, or every layer, adapts too;
- ``maml-20-steps``: 20 inner steps;
- ``meta-sgd``: a learned step size per parameter (Meta-SGD);
- ``maml-rank`` / ``maml-mse+rank``: a pairwise ranking loss instead of / beside MSE
  (``maml-mse+rank`` won on the validation workloads and is the default since);
- ``maml-list`` / ``maml-mse+list``: a listwise loss (ListNet) instead of / beside MSE;
- ``maml-1-way``: tasks of one workload with 16 shots (as the tuner adapts: one task's
  measurements), 8 tasks per meta-batch;
- ``1-way-rank-sgd``: one-workload tasks, MSE + rank loss and Meta-SGD together;
- ``maml-support-targets`` / ``1-way-support-targets``: meta-train on targets relative to
  each workload's best support sample (``meta.targets=support``), as the tuner adapts
  (relative to the best measured so far), not to the workload's best over all samples;
- ``rank-pretrain``: pre-trained with MSE + a pairwise ranking loss over each workload's
  graphs (batches of 16 graphs per workload), then the default MAML (MSE + rank);
- ``larger-net``: twice the width (128) and three GCN layers, pre-trained and meta-trained
  (MSE + rank) anew;
- ``maml-context`` / ``1-way-context``: in-context adaptation: after the head's steps, an
  attention over the support set (width 32, :mod:`metatune.context`) adds the residuals of
  similar measured candidates; 5-way tasks, or one-workload tasks of 32 shots;
- ``1-way-long`` / ``1-way-context-long``: one-workload tasks of 32 shots, 5x the
  meta-batches (1500) at 3x the outer step size (3e-3), without and with the attention
  (``1-way-long`` is ``train.py``'s default since 2026-12-03);
- ``1-way-long-zero-shot``: ``1-way-long`` with the query loss before adapting in the
  meta-objective too (``meta.zero_shot_weight=1``), so that the initial weights score a
  task on the targets' scale before any measurement (MSE(D) at k = 0); won on the
  validation workloads (``docs/lab/cost-model/adaptation-ablation-zero-shot-val.md``) but
  did not tune better (``docs/lab/tuning/zero-shot-tuning.md``), so it is not the default.

Usage:
    python -m experiments.adaptation_ablation --data data/llvm-icelake-server
    python -m experiments.adaptation_ablation --data ... --variants maml meta-sgd \
        --limit 6 --seeds 0
    python -m experiments.adaptation_ablation --data ... --variants maml-mse+rank maml-list \
        maml-mse+list --val-only --out docs/lab/cost-model/adaptation-ablation-listwise
Checkpoints go to ``work/ablation/<dataset>/<graph>/`` (kept: a rerun skips trained ones).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

#: The episodes every variant was measured with, before one-workload tasks meta-trained 5x
#: longer became train.py's default: each variant states its own, so that it means what it
#: measured whatever the defaults are.
#: MAML's objective, the query loss after adapting only (no zero-shot term).
MAML_OBJECTIVE = "meta.zero_shot_weight=0"
FIVE_WAY = ["meta.steps=300", "meta.ways=5", "meta.shots=8", "meta.tasks_per_batch=4",
            "meta.beta=0.001", MAML_OBJECTIVE]
ONE_WAY_16 = ["meta.steps=300", "meta.ways=1", "meta.shots=16", "meta.tasks_per_batch=8",
              "meta.beta=0.001", MAML_OBJECTIVE]
ONE_WAY_32 = ["meta.steps=300", "meta.ways=1", "meta.shots=32", "meta.tasks_per_batch=8",
              "meta.beta=0.001", MAML_OBJECTIVE]
ONE_WAY_LONG = ["meta.steps=1500", "meta.ways=1", "meta.shots=32", "meta.tasks_per_batch=8",
                "meta.beta=0.003", MAML_OBJECTIVE]  # train.py's default

VARIANTS: dict[str, list[str]] = {
    "pretrain-only": ["meta.steps=0", "meta.adapt.loss=mse"],
    "maml": [*FIVE_WAY, "meta.adapt.loss=mse"],
    "maml-last-gcn": [*FIVE_WAY, "meta.adapt.scope=last_gcn", "meta.adapt.loss=mse"],
    "maml-all": [*FIVE_WAY, "meta.adapt.scope=all", "meta.adapt.loss=mse"],
    "maml-20-steps": [*FIVE_WAY, "meta.adapt.steps=20", "meta.adapt.loss=mse"],
    "meta-sgd": [*FIVE_WAY, "meta.adapt.meta_sgd=true", "meta.adapt.loss=mse"],
    "maml-rank": [*FIVE_WAY, "meta.adapt.loss=rank"],
    "maml-mse+rank": [*FIVE_WAY, "meta.adapt.loss=mse+rank"],
    "maml-list": [*FIVE_WAY, "meta.adapt.loss=list"],
    "maml-mse+list": [*FIVE_WAY, "meta.adapt.loss=mse+list"],
    "maml-1-way": [*ONE_WAY_16, "meta.adapt.loss=mse"],
    "1-way-rank-sgd": [*ONE_WAY_16, "meta.adapt.loss=mse+rank", "meta.adapt.meta_sgd=true"],
    "maml-support-targets": [*FIVE_WAY, "meta.targets=support", "meta.adapt.loss=mse"],
    "1-way-support-targets": [*ONE_WAY_16, "meta.targets=support", "meta.adapt.loss=mse"],
    "rank-pretrain": [*FIVE_WAY, "pretrain.loss=mse+rank", "pretrain.per_workload=16",
                      "meta.adapt.loss=mse+rank"],
    "larger-net": [*FIVE_WAY, "model.hidden=128", "model.head_hidden=128",
                   "model.gcn_layers=3", "meta.adapt.loss=mse+rank"],
    "maml-context": [*FIVE_WAY, "meta.adapt.context=32", "meta.adapt.loss=mse+rank"],
    "1-way-context": [*ONE_WAY_32, "meta.adapt.context=32", "meta.adapt.loss=mse+rank"],
    "1-way-long": [*ONE_WAY_LONG, "meta.adapt.loss=mse+rank"],
    "1-way-long-zero-shot": [*(o for o in ONE_WAY_LONG if o != MAML_OBJECTIVE),
                             "meta.zero_shot_weight=1.0", "meta.adapt.loss=mse+rank"],
    "1-way-context-long": [*ONE_WAY_LONG, "meta.adapt.context=32", "meta.adapt.loss=mse+rank"],
}
#: Variants pre-trained on their own (another pre-training loss or network shape), not
#: meta-trained from the shared pre-trained network.
OWN_PRETRAINING = ("rank-pretrain", "larger-net")


def _parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="dataset dir with train/ and heldout/")
    p.add_argument("--graph", default="super", choices=("super", "plain"))
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--train", nargs="*", default=[], metavar="KEY=VALUE",
                   help="train config overrides for every variant (e.g. meta.steps=100)")
    p.add_argument("--val-only", action="store_true",
                   help="stop after the choice on the validation workloads")
    p.add_argument("--work", default="work/ablation")
    p.add_argument("--out", default="docs/lab/cost-model/adaptation-ablation")
    return p.parse_known_args(argv)  # the rest goes to model_accuracy.py


def train_variant(name: str, *, data: str, graph: str, ckpt_dir: str, pretrained: str | None,
                  extra: list[str]) -> str:
    """Train one variant (skipped when its checkpoint exists); returns the checkpoint."""
    from lightning_modules.app import run_train
    from lightning_modules.config import load_train_config

    out = os.path.join(ckpt_dir, f"{name}.ckpt")
    if os.path.exists(out):
        print(f"{name}: {out} exists, not retrained", flush=True)
        return out
    overrides = [f"data_dir={data}", f"graph={graph}", f"out={out}",
                 f"log_dir={os.path.join(ckpt_dir, 'runs')}", *extra, *VARIANTS[name]]
    if pretrained:
        overrides += [f"pretrained={pretrained}", "pretrain.epochs=0"]
    run_train(load_train_config(overrides=overrides))
    return out


def main(argv: list[str] | None = None) -> None:
    args, accuracy_args = _parse(argv)
    from bench import model_accuracy

    data = os.path.normpath(args.data)
    ckpt_dir = os.path.join(args.work, os.path.basename(data), args.graph)
    # every variant starts from this one pre-trained network (itself the first variant)
    base = train_variant("pretrain-only", data=data, graph=args.graph, ckpt_dir=ckpt_dir,
                         pretrained=None, extra=args.train)
    checkpoints = {"pretrain-only": base}
    for name in args.variants:
        if name != "pretrain-only":
            own = name in OWN_PRETRAINING
            checkpoints[name] = train_variant(name, data=data, graph=args.graph,
                                              ckpt_dir=ckpt_dir,
                                              pretrained=None if own else base,
                                              extra=args.train)
    models = [f"--model={name}={checkpoints[name]}" for name in args.variants]
    command = "python -m experiments.adaptation_ablation " + shlex.join(sys.argv[1:])
    val = model_accuracy.main([  # the fixed settings last: every workload has 64 samples
        *models, *accuracy_args, "--data", data, "--split", "val", "--no-xgb",
        "--ks", "0", "8", "16", "32", "--query", "24", "--out", args.out + "-val",
        "--title", f"Adaptation ablation ({args.graph} graph): choosing on the validation "
                   "workloads"], command=command)
    append_variants(args.out + "-val.md", args.variants)
    winner = choose(val["summary"])
    append_choice(args.out + "-val.md", val["summary"], winner)
    print(f"chosen on the validation workloads: {winner}", flush=True)
    if args.val_only:
        return
    model_accuracy.main([
        "--data", data, "--out", args.out,
        "--title", f"Adaptation ablation ({args.graph} graph) on held-out network convolutions"
                   f" (chosen on validation: {winner})", *models, *accuracy_args],
        command=command)
    append_variants(args.out + ".md", args.variants)


def _append(page: str, lines: list[str]) -> None:
    """Add lines to a page written by ``model_accuracy``."""
    with open(page, "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _mean_over_k(summary: dict, name: str, metric: str) -> float:
    """A variant's metric (median over seeds) averaged over the evaluated k (NaN: none)."""
    import math

    values = [v[metric]["median"] for v in summary[name].values()]
    return sum(values) / len(values) if values else math.nan


def append_choice(page: str, summary: dict, winner: str) -> None:
    """Add the choice, and each variant's means over k of :data:`CHOICE_METRICS`."""
    lines = ["", "## Choice", "",
             f"Chosen: **{winner}**, the best mean rank over pairwise accuracy, top-5 recall, "
             "MSE and MSE(D), each averaged over k (`choose` in "
             "`experiments.adaptation_ablation`). "
             "Means over k:", "",
             "| variant | " + " | ".join(CHOICE_METRICS) + " |",
             "|---|" + "---|" * len(CHOICE_METRICS)]
    lines += [f"| {name} | " + " | ".join(f"{_mean_over_k(summary, name, m):.3f}"
                                         for m in CHOICE_METRICS) + " |" for name in summary]
    _append(page, lines)


def append_variants(page: str, names: list[str]) -> None:
    """Add the variants' training overrides to a page written by ``model_accuracy``."""
    lines = ["", "## Variants", "",
             "Each variant is `python train.py` with these overrides, meta-trained from the "
             "same pre-trained network (`pretrained=<pretrain-only.ckpt> pretrain.epochs=0`; "
             "the rest of `configs/train.yaml` as it was when run), but those marked "
             "*own pre-training*:", ""]
    lines += [f"- `{name}`: `{' '.join(VARIANTS[name])}`"
              + (" (*own pre-training*)" if name in OWN_PRETRAINING else "") for name in names]
    _append(page, lines)


#: The metrics a variant is chosen on, and whether higher is better: the issue's goals
#: (ranking, the top candidates, and the error on them), not ranking alone, since a
#: pure ranking loss lets the predictions drift off the throughput scale.
CHOICE_METRICS = {"pairwise": True, "top5_recall": True, "mse": False, "mse_d": False}


def choose(summary: dict) -> str:
    """The variant with the best mean rank over :data:`CHOICE_METRICS`, each averaged over
    the evaluated k (ties: the better mean pairwise accuracy).

    Args:
        summary: :func:`bench.accuracy.summarize` of the validation run.
    """
    import math

    if not summary:
        raise SystemExit("no variant was evaluated on the validation workloads")

    ranks = dict.fromkeys(summary, 0.0)
    for metric, higher in CHOICE_METRICS.items():
        keys = {}  # lower is better; a variant without the metric comes last
        for name in summary:
            m = _mean_over_k(summary, name, metric)
            keys[name] = math.inf if math.isnan(m) else (-m if higher else m)
        for name in summary:  # a variant's place: how many are strictly better
            ranks[name] += sum(keys[other] < keys[name] for other in summary)
    return min(summary, key=lambda name: (ranks[name],
                                          -_mean_over_k(summary, name, "pairwise")))


if __name__ == "__main__":
    main()
