"""Cost-model accuracy on the held-out network convolutions after k measured samples
(or, with ``--split val``, on the checkpoints' validation workloads, to choose settings).

MetaTune checkpoints (by default the shipped super-graph and plain ones; any others, such
as the adaptation ablations, with ``--model NAME=PATH``) against MetaSchedule's XGBoost
from scratch (``xgb``) and pre-trained on the training split (``xgb-Xfer``), at k = 0, 8,
16, 32, 64 support samples, on the same workloads, query sets and seeds; see
:mod:`bench.accuracy`. Each checkpoint adapts as it was meta-trained to (its stored
adaptation settings, the tuner's online fine-tuning). Writes
``docs/bench/model-accuracy.{md,json}`` unless ``--out`` says otherwise.

Usage:
    python -m bench.model_accuracy                       # all held-out workloads, seeds 0-2
    python -m bench.model_accuracy --limit 6 --seeds 0   # a quick look
    python -m bench.model_accuracy --data data/llvm-icelake-server \
        --model maml=ckpts/maml.ckpt --model meta-sgd=ckpts/meta-sgd.ckpt --out docs/ablation
    # across CPUs: models and xgb-Xfer's base trained on one CPU's data, scored on another's
    python -m bench.model_accuracy --data data/llvm-haswell \
        --train-data data/llvm-icelake-server \
        --model super=checkpoints/llvm-icelake-server-super.ckpt
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from bench.accuracy.checkpoints import (
    data_target,
    network_workloads,
    refuse_trained_on,
    validation_workloads,
)
from bench.accuracy.page import METHOD_NOTES, describe, markdown, scale
from bench.common import REPO, in_repo, provenance, write_results
from metatune.config import DEFAULT_DATA_DIR

OUT = "docs/bench/model-accuracy"  #: the page's default prefix, relative to the repository


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.relpath(DEFAULT_DATA_DIR, REPO),
                   help="dataset (train/, heldout/ and their -nhwc twins)")
    p.add_argument("--split", default="heldout",
                   choices=("heldout", "heldout-nhwc", "val", "train-networks",
                            "train-networks-nhwc"),
                   help="heldout: the network convolutions (report on these); heldout-nhwc: "
                        "the same as tune.py extracts them in NHWC, its default layout; val: the "
                        "checkpoints' validation workloads of the training split (choose "
                        "settings on these, never on the held-out ones; with --no-xgb); "
                        "train-networks: with --networks, those networks' convs of the other "
                        "networks' split, left out of training (train.py "
                        "data.leave_out_networks=[...]) to choose training data on; "
                        "train-networks-nhwc: the same in NHWC")
    p.add_argument("--model", action="append", default=[], metavar="NAME=CHECKPOINT",
                   help="a MetaTune checkpoint to evaluate (repeatable); default: "
                        "metatune-super and metatune-plain = checkpoints/<dataset>-<graph>.ckpt")
    p.add_argument("--no-xgb", action="store_true", help="leave out xgb and xgb-Xfer")
    p.add_argument("--seen-ok", action="store_true",
                   help="score checkpoints on workloads of their training data too (by name: "
                        "the same tasks measured on another CPU, or in the other layout) "
                        "instead of refusing; to choose among checkpoints on a training "
                        "split, never an accuracy to report: the page counts them")
    p.add_argument("--gp", action="store_true",
                   help="also score each checkpoint followed by the BO search's GP "
                        "(NAME+gp: how the tuner ranks candidates)")
    p.add_argument("--train-data", default=None,
                   help="the dataset xgb-Xfer pre-trains on (its train/ split); default: --data."
                        " Another CPU's dataset measures transfer across CPUs")
    p.add_argument("--xfer-splits", nargs="+", default=None, metavar="SPLIT",
                   help="the splits of --train-data xgb-Xfer's base model trains on (default: "
                        "train); paths relative to it name other datasets' splits, e.g. "
                        "train-networks ../llvm-icelake-server/train: the checkpoints' data")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--ks", type=int, nargs="+", default=[0, 8, 16, 32, 64])
    p.add_argument("--query", type=int, default=32, help="query candidates per workload")
    p.add_argument("--limit", type=int, default=None, help="first N held-out workloads only")
    p.add_argument("--networks", nargs="+", default=None, metavar="NETWORK",
                   help="score only these networks' convs of the split (meta.json's networks)")
    p.add_argument("--adapt-steps", type=int, default=None,
                   help="override every checkpoint's adaptation steps")
    p.add_argument("--adapt-lr", type=float, default=None,
                   help="override every checkpoint's adaptation step size")
    p.add_argument("--gp-embed", action="store_true",
                   help="also score each checkpoint followed by a GP over its embeddings "
                        "(NAME+gp-embed; an experiment)")
    p.add_argument("--ensemble", action="append", default=[], metavar="NAME=A+B[+...]",
                   help="also score the mean of these methods' scores (--model NAMEs: "
                        "checkpoints averaged as tune.py's metatune.ensemble averages them; "
                        "NAME=A,B where a member's name holds a '+'; repeatable)")
    p.add_argument("--cache-dir", default="work/cache")
    p.add_argument("--out", default=OUT)
    p.add_argument("--title", default="Cost-model accuracy on held-out network convolutions")
    return p.parse_args(argv)


def ensembles(specs: list[str], methods: dict) -> list[tuple[str, list[str]]]:
    """``--ensemble NAME=A+B`` as ``(NAME, [A, B])`` pairs, every member a method already
    scored or an ensemble named before (so ``pair=a+b`` then ``mix=pair+xgb-Xfer`` weighs
    the pair and xgb-Xfer alike). Members whose names hold a ``+`` (``super+gp``) are
    separated by commas instead: ``NAME=A+gp,B+gp``.

    Raises:
        SystemExit: A malformed spec, a taken name or an unknown member.
    """
    out = []
    methods = dict(methods)  # the ensembles named so far join them
    for spec in specs:
        name, _, rhs = spec.partition("=")
        members = [m for m in rhs.split("," if "," in rhs else "+") if m]
        if not name or len(members) < 2:
            raise SystemExit(f"--ensemble {spec!r}: give NAME=A+B (or NAME=A,B) with two or "
                             "more methods")
        unknown = [m for m in members if m not in methods]
        if unknown or name in methods:
            raise SystemExit(f"--ensemble {spec!r}: " + (
                f"no method {unknown[0]!r} (these are scored: {', '.join(methods)})" if unknown
                else f"{name!r} is taken by another method: name the ensemble otherwise"))
        out.append((name, members))
        methods[name] = None
    return out


def _check(args: argparse.Namespace) -> None:
    """Refuse contradictory arguments before anything loads.

    Raises:
        SystemExit: A networks fold without its networks, or xgb on the validation split.
    """
    if args.split.startswith("train-networks") and not args.networks:
        raise SystemExit(f"--split {args.split}: name the networks the checkpoints left out "
                         "(--networks ...; train.py data.leave_out_networks=[...]); "
                         "xgb-Xfer's base model leaves them out too")
    if args.split == "val" and not args.no_xgb:
        raise SystemExit("--split val: xgb-Xfer's base model is trained on the whole training "
                         "split, these workloads included; pass --no-xgb")


def _workloads(args: argparse.Namespace, specs: list[list[str]], modes: tuple[str, ...]):
    """The scored workloads, and how many of them each checkpoint was trained on (by its
    path, :func:`bench.common.in_repo`).

    Raises:
        SystemExit: No workload has enough samples, validation workloads missing from the
            data, or a checkpoint trained on scored workloads (without ``--seen-ok``).
    """
    from bench.accuracy.workloads import load_eval_workloads, load_split_workloads
    from metatune.dataset import workload_order

    data, paths = in_repo(args.data), [in_repo(p) for _, p in specs]
    min_samples = args.query + max(args.ks)
    if args.split == "val":  # from every training split the checkpoints drew them from
        names, splits = validation_workloads(paths, args.data)
        listed = {w["name"] for sp in splits for w in workload_order(os.path.join(data, sp))}
        if set(names) - listed:
            raise SystemExit(f"--split val: {len(set(names) - listed)} validation workloads "
                             f"of the checkpoints are in none of {', '.join(splits)} of "
                             f"{args.data} (e.g. {sorted(set(names) - listed)[0]})")
        seen = refuse_trained_on(paths, names, args.seen_ok)
        workloads = load_split_workloads(data, splits, modes, min_samples, names, args.limit)
    else:
        split_dir = os.path.join(data, args.split)
        names = network_workloads(split_dir, args.networks) if args.networks else None
        workloads = load_eval_workloads(split_dir, modes, min_samples=min_samples,
                                        limit=args.limit, names=names)
    if not workloads:
        raise SystemExit(f"no {args.split} workload has {min_samples} valid "
                         "samples: lower --query or the largest of --ks")
    if args.split != "val":
        seen = refuse_trained_on(paths, [w.name for w in workloads], args.seen_ok)
    return workloads, seen


def _with_gp(args: argparse.Namespace, methods: dict, notes: dict, names: list[str]) -> None:
    """Add ``NAME+gp`` (and ``NAME+gp-embed``) for each checkpoint."""
    from bench.accuracy.methods import GPMethod

    if args.gp_embed:
        for name in names:
            methods[f"{name}+gp-embed"] = GPMethod(methods[name], features="embed")
            notes[f"{name}+gp-embed"] = (f"`{name}` adapted, then a GP over its graph "
                                         "embeddings (standardized) with its prediction as "
                                         "prior mean, fitted on the k samples (experiment)")
    if args.gp:
        for name in names:
            methods[f"{name}+gp"] = GPMethod(methods[name])
            notes[f"{name}+gp"] = (f"`{name}` adapted, then the batch BO search's GP over knob "
                                   "vectors with its prediction as prior mean, fitted on the k "
                                   "samples: how the tuner ranks candidates")


def main(argv: list[str] | None = None, command: str | None = None) -> dict:
    """Run the comparison (command-line arguments ``argv``); returns the JSON document.

    Args:
        argv: The arguments (``None``: the command line's).
        command: The command to record (a script that calls this one passes its own).
    """
    args = _parse(argv)
    _check(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from bench.accuracy.methods import EnsembleMethod, MetaTuneMethod, XGBMethod
    from bench.accuracy.scoring import evaluate, summarize
    from metatune.config import default_checkpoint
    from metatune.provenance import simd_flags
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.runtime import runtime_info
    from tuner.engine.targets import resolve_target
    from tuner.models.trained import load_model
    from tuner.models.xgb_transfer import base_booster

    dataset = os.path.basename(os.path.normpath(args.data))
    specs = [m.split("=", 1) for m in args.model] or [
        ["metatune-super", default_checkpoint(dataset, graph="super")],
        ["metatune-plain", default_checkpoint(dataset, graph="plain")]]
    fold = args.split.startswith("train-networks")
    split_dir = os.path.join(in_repo(args.data), "train" if args.split == "val" else args.split)
    info = resolve_target(data_target(split_dir))
    load_tensor_intrinsics((info.kind,))
    models = {name: load_model(in_repo(path), graph=None) for name, path in specs}
    for model in models.values():
        model.inner.override(steps=args.adapt_steps, lr=args.adapt_lr)
    start = time.perf_counter()
    workloads, seen = _workloads(args, specs, tuple(sorted({m.graph for m in models.values()})))
    logging.info("%d %s workloads loaded in %.0f s", len(workloads), args.split,
                 time.perf_counter() - start)
    methods: dict = {name: MetaTuneMethod(model) for name, model in models.items()}
    notes = {name: f"`{os.path.relpath(in_repo(path), REPO)}`: {models[name].graph} graph, "
                   f"adapts {describe(models[name].inner.cfg)}{scale(models[name].calibration)}"
                   + (f"; **trained on {seen[in_repo(path)]} of the {len(workloads)} scored "
                      "workloads** (by name, measured elsewhere)" if in_repo(path) in seen else "")
             for name, path in specs}
    _with_gp(args, methods, notes, list(models))
    if not args.no_xgb:
        base = base_booster([os.path.join(in_repo(args.train_data or args.data), sp)
                             for sp in args.xfer_splits or ["train"]], info.target,
                            info.num_cores, in_repo(args.cache_dir),
                            leave_out_networks=args.networks if fold else ())
        if fold:
            notes["xgb-Xfer"] = (METHOD_NOTES["xgb-Xfer"] + "; its base model trained "
                                 "without the workloads of " + ", ".join(args.networks))
        methods.update({"xgb": XGBMethod(info.target, info.num_cores),
                        "xgb-Xfer": XGBMethod(info.target, info.num_cores, base)})
    for name, members in ensembles(args.ensemble, methods):
        methods[name] = EnsembleMethod([methods[m] for m in members])
        notes[name] = "the mean of " + ", ".join(f"`{m}`" for m in members) + "'s scores"
    rows = evaluate(workloads, methods, tuple(args.ks), args.seeds, args.query,
                    progress=lambda msg: logging.info("done %s", msg))
    doc = {
        **provenance("bench.model_accuracy"), **({"command": command} if command else {}),
        "title": args.title, "data": args.data, "split": args.split,
        "train_data": args.train_data or args.data, "xfer_splits": args.xfer_splits or ["train"],
        "target": info.description,
        "runtime": runtime_info(info.num_cores), "cpu_flags": simd_flags(),
        "workloads": len(workloads), "networks": args.networks, "query": args.query,
        "seeds": args.seeds,
        "notes": notes,
        "adapt": {name: m.inner.cfg.to_dict() for name, m in models.items()},
        "seconds": round(time.perf_counter() - start, 1),
        "summary": summarize(rows),
        # every (method, k, seed, workload) score, compact: one list per row
        "row_columns": list(rows[0]) if rows else [],
        "rows": [[round(v, 4) if isinstance(v, float) else v for v in r.values()]
                 for r in rows],
    }
    out = in_repo(args.out)
    write_results(out + ".json", out + ".md", doc, markdown(doc), rows_key="rows")
    return doc


if __name__ == "__main__":
    main()
