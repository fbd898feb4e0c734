"""Cost-model accuracy on the held-out network convolutions after k measured samples.

MetaTune (super-graph and plain checkpoints) against MetaSchedule's XGBoost from scratch
(``xgb``) and pre-trained on the training split (``xgb-Xfer``), at k = 0, 8, 16, 32, 64
support samples, on the same workloads, query sets and seeds; see :mod:`tuner.app.accuracy`.
Writes ``docs/model-accuracy.{md,json}``.

Usage:
    python bench/model_accuracy.py                       # all held-out workloads, seeds 0-2
    python bench/model_accuracy.py --limit 6 --seeds 0   # a quick look
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from common import REPO, provenance, write_results

METHOD_NOTES = {
    "metatune-super": "GCN on the super-graph (meta-BO-T's model), head adapted on the k samples",
    "metatune-plain": "GCN on the plain graph (meta-BO's model), head adapted on the k samples",
    "xgb": "MetaSchedule XGBModel trained from scratch on the k samples (random at k=0)",
    "xgb-Xfer": "XGBModel pre-trained on the training split, refit on the k samples "
                "(AutoTVM-style discounted base margin)",
}


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="data/llvm", help="dataset (train/ and heldout/)")
    p.add_argument("--checkpoint-super", default=None,
                   help="default: checkpoints/<dataset>-super.ckpt")
    p.add_argument("--checkpoint-plain", default=None,
                   help="default: checkpoints/<dataset>-plain.ckpt")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--ks", type=int, nargs="+", default=[0, 8, 16, 32, 64])
    p.add_argument("--query", type=int, default=32, help="query candidates per workload")
    p.add_argument("--limit", type=int, default=None, help="first N held-out workloads only")
    p.add_argument("--adapt-steps", type=int, default=None,
                   help="default: the tuner's (configs/tune.yaml metatune.adapt_steps)")
    p.add_argument("--adapt-lr", type=float, default=None,
                   help="default: the tuner's (configs/tune.yaml metatune.adapt_lr)")
    p.add_argument("--cache-dir", default="work/cache")
    p.add_argument("--out", default="docs/model-accuracy")
    return p.parse_args()


def _markdown(doc: dict) -> str:
    lines = ["# Cost-model accuracy on held-out network convolutions", "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']}",
             f"- {doc['workloads']} held-out workloads (conv tasks of alexnet, resnet-18, "
             f"vgg-16, squeezenet; never trained on), query {doc['query']} candidates each, "
             f"seeds {doc['seeds']}; support = k other measured candidates",
             "- targets: throughput relative to the best support candidate (the workload's "
             "best at k = 0); each cell: mean over workloads, median over seeds "
             "(min-max in brackets)", "",
             "Methods:", ""]
    lines += [f"- `{m}`: {METHOD_NOTES[m]}" for m in doc["summary"]]
    titles = {"mse": "MSE (lower is better)", "mse_d": "MSE(D), top 25 % (lower is better)",
              "pairwise": "Pairwise ranking accuracy (higher is better)",
              "top5_recall": "Top-5 recall (higher is better)"}
    ks = list(next(iter(doc["summary"].values())))
    for metric, title in titles.items():
        lines += ["", f"## {title}", "", "| method | " + " | ".join(f"k={k}" for k in ks) + " |",
                  "|---|" + "---|" * len(ks)]
        for method, per_k in doc["summary"].items():
            cells = [f"{per_k[k][metric]['median']:.3f} "
                     f"({per_k[k][metric]['min']:.3f}-{per_k[k][metric]['max']:.3f})"
                     for k in ks]
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    args = _parse()
    sys.path.insert(0, REPO)
    os.chdir(REPO)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from metatune.config import default_checkpoint
    from tuner.app.accuracy import (MetaTuneMethod, XGBMethod, evaluate, load_eval_workloads,
                                    summarize)
    from tuner.app.config import load_tune_config
    from tuner.models.cost_model import load_net
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.targets import resolve_target
    from tuner.models.xgb_transfer import base_booster

    tuner = load_tune_config().metatune  # the tuner's online adaptation, as tune.py runs it
    steps = args.adapt_steps or tuner.adapt_steps
    lr = args.adapt_lr or tuner.adapt_lr
    dataset = os.path.basename(os.path.normpath(args.data))
    info = resolve_target("llvm")
    load_tensor_intrinsics(("llvm",))
    nets = {
        "super": load_net(args.checkpoint_super or default_checkpoint(dataset, "super")),
        "plain": load_net(args.checkpoint_plain or default_checkpoint(dataset, "plain")),
    }
    start = time.perf_counter()
    base = base_booster(os.path.join(args.data, "train"), info.target, info.num_cores,
                        args.cache_dir)
    workloads = load_eval_workloads(os.path.join(args.data, "heldout"), ("super", "plain"),
                                    min_samples=args.query + max(args.ks), limit=args.limit)
    logging.info("%d held-out workloads loaded in %.0f s", len(workloads),
                 time.perf_counter() - start)
    methods = {
        "metatune-super": MetaTuneMethod(nets["super"], "super", steps, lr),
        "metatune-plain": MetaTuneMethod(nets["plain"], "plain", steps, lr),
        "xgb": XGBMethod(info.target, info.num_cores),
        "xgb-Xfer": XGBMethod(info.target, info.num_cores, base),
    }
    rows = evaluate(workloads, methods, tuple(args.ks), args.seeds, args.query,
                    progress=lambda msg: logging.info("done %s", msg))
    doc = {
        **provenance("model_accuracy.py"),
        "workloads": len(workloads), "query": args.query, "seeds": args.seeds,
        "adapt": {"steps": steps, "lr": lr},
        "seconds": round(time.perf_counter() - start, 1),
        "summary": summarize(rows),
        # every (method, k, seed, workload) score, compact: one list per row
        "row_columns": list(rows[0]) if rows else [],
        "rows": [[round(v, 4) if isinstance(v, float) else v for v in r.values()]
                 for r in rows],
    }
    write_results(args.out + ".json", args.out + ".md", doc, _markdown(doc), rows_key="rows")


if __name__ == "__main__":
    main()
