"""Cost-model accuracy on the held-out network convolutions after k measured samples
(or, with ``--split val``, on the checkpoints' validation workloads, to choose settings).

MetaTune checkpoints (by default the shipped super-graph and plain ones; any others, such
as the adaptation ablations, with ``--model NAME=PATH``) against MetaSchedule's XGBoost
from scratch (``xgb``) and pre-trained on the training split (``xgb-Xfer``), at k = 0, 8,
16, 32, 64 support samples, on the same workloads, query sets and seeds; see
:mod:`tuner.app.accuracy`. Each checkpoint adapts as it was meta-trained to (its stored
adaptation settings, the tuner's online fine-tuning). Writes ``docs/model-accuracy.{md,json}``.

Usage:
    python bench/model_accuracy.py                       # all held-out workloads, seeds 0-2
    python bench/model_accuracy.py --limit 6 --seeds 0   # a quick look
    python bench/model_accuracy.py --data data/llvm-icelake-server \
        --model maml=ckpts/maml.ckpt --model meta-sgd=ckpts/meta-sgd.ckpt --out docs/ablation
    # across CPUs: models and xgb-Xfer's base trained on one CPU's data, scored on another's
    python bench/model_accuracy.py --data data/llvm-haswell \
        --train-data data/llvm-icelake-server \
        --model super=checkpoints/llvm-icelake-server-super.ckpt
    # each checkpoint also corrected by its compiled code (bench/compiled_correction.py)
    python bench/model_accuracy.py --data data/llvm-emeraldrapids --split heldout-nhwc \
        --model super=checkpoints/llvm-emeraldrapids-super.ckpt --compiled-correction
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import sys
import time

from common import REPO, provenance, write_results

sys.path.insert(0, REPO)
from metatune.config import DEFAULT_DATA_DIR  # noqa: E402
from tuner.search.params import GP_KERNELS  # noqa: E402

METHOD_NOTES = {
    "metatune-super": "GCN on the super-graph (meta-BO-T's model), head adapted on the k samples",
    "metatune-plain": "GCN on the plain graph (meta-BO's model), head adapted on the k samples",
    "xgb": "MetaSchedule XGBModel trained from scratch on the k samples (random at k=0)",
    "xgb-Xfer": "XGBModel pre-trained on the training split, refit on the k samples "
                "(AutoTVM-style discounted base margin)",
}


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
    p.add_argument("--gp-kernel", nargs="+", default=["knobs"], choices=GP_KERNELS,
                   help="--gp's kernels (search_params.bo.kernel): knobs (NAME+gp), "
                        "knobs+prior (NAME+gp-prior: the prediction a kernel input too)")
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
    p.add_argument("--adapt-scope", choices=["head", "last_gcn", "all"], default=None,
                   help="override every checkpoint's adaptation scope (what adapts)")
    p.add_argument("--gp-embed", action="store_true",
                   help="also score each checkpoint followed by a GP over its embeddings "
                        "(NAME+gp-embed; an experiment)")
    p.add_argument("--ridge", action="store_true",
                   help="also score each checkpoint plus a task-local ridge regression over "
                        "knob vectors on its residuals (NAME+ridge), and XGBoost on the knob "
                        "vectors from scratch (xgb-knobs); experiments")
    p.add_argument("--ridge-lam", type=float, nargs="+", default=[100.0],
                   help="--ridge's penalty; several: one method each (NAME+ridge-<lam>)")
    p.add_argument("--blend-xgb", type=float, nargs="+", default=[], metavar="K0",
                   help="also score each checkpoint blended with XGBoost trained on the k "
                        "samples, weighted k / (k + K0) (NAME+xgb; several K0: NAME+xgb-<K0>)")
    p.add_argument("--ensemble", action="append", default=[], metavar="NAME=A+B[+...]",
                   help="also score the mean of these methods' scores (--model NAMEs: "
                        "checkpoints averaged as tune.py's metatune.ensemble averages them; "
                        "NAME=A,B where a member's name holds a '+'; repeatable)")
    p.add_argument("--compiled-correction", nargs="*", default=None, metavar="NAME",
                   help="add NAME+asm for these models (none named: every model): its adapted "
                        "scores corrected by boosted trees over the compiled code's features, "
                        "fitted on the checkpoint's validation workloads in --train-data "
                        "(bench/compiled_correction.py; builds every schedule not in "
                        "--compiled-cache, about 0.5 s each; bench/compile_features.py builds "
                        "them ahead on every core)")
    p.add_argument("--compiled-local", type=float, default=16.0, metavar="N0",
                   help="NAME+asm-local: the guess's weight refitted on the k samples, shrunk to "
                        "the global one as if seen on N0 more")
    p.add_argument("--compiled-fit-seeds", type=int, nargs="+", default=[0], metavar="SEED",
                   help="which validation tasks weigh the correction's guess (the rest train "
                        "its trees): NAME+asm and NAME+asm-local with the first, "
                        "NAME+asm-fit<SEED> with each other (how much the fold matters)")
    p.add_argument("--compiled-cache", default="work/cache/compiled",
                   help="where the compiled-code features are kept")
    p.add_argument("--cache-dir", default="work/cache")
    p.add_argument("--out", default="docs/model-accuracy")
    p.add_argument("--title", default="Cost-model accuracy on held-out network convolutions")
    return p.parse_args(argv)


def _ensembles(specs: list[str], methods: dict) -> list[tuple[str, list[str]]]:
    """``--ensemble NAME=A+B`` as ``(NAME, [A, B])`` pairs, every member a method already
    scored or an ensemble named before (so ``pair=a+b`` then ``mix=pair+xgb-Xfer`` weighs
    the pair and xgb-Xfer alike). Members whose names hold a ``+`` (``super+asm``) are
    separated by commas instead: ``NAME=A+asm,B+asm``.

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


def _markdown(doc: dict) -> str:
    split = doc.get("split", "heldout")
    nets = ", ".join(doc.get("networks") or ["alexnet", "resnet-18", "vgg-16", "squeezenet"])
    where = (f"{doc['workloads']} held-out workloads (conv tasks of {nets}"
             + (" in NHWC, as tune.py extracts them by default"
                if split == "heldout-nhwc" else "")
             + "; never trained on)"
             if split.startswith("heldout") else
             f"{doc['workloads']} conv tasks of {nets} in the other networks' split"
             + (" in NHWC" if split == "train-networks-nhwc" else "")
             + " (not in the held-out split: a validation fold to choose on; left out of "
             "training where a checkpoint was trained with data.leave_out_networks)"
             if split.startswith("train-networks") else
             f"{doc['workloads']} validation workloads of the training split (the "
             "checkpoints'; not trained on, used to choose settings)")
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
             f"- {where}, query {doc['query']} candidates each, "
             f"seeds {doc['seeds']}; support = k other measured candidates",
             "- targets: throughput relative to the best support candidate (the workload's "
             "best at k = 0); each cell: mean over workloads, median over seeds "
             "(min-max in brackets)", "",
             "Methods:", ""]
    lines += [f"- `{m}`: {doc['notes'].get(m) or METHOD_NOTES[m]}" for m in doc["summary"]]
    for name, fit in doc.get("compiled_corrections", {}).items():
        lines.append(f"- `{name}`'s fit: {fit['workloads']} validation workloads of "
                     f"{fit.get('tasks', '?')} tasks ({fit['samples']} schedules), trees on "
                     f"{fit['train_workloads']}, "
                     f"weighed on {fit['weigh_workloads']} (guess-residual correlation "
                     f"{fit['guess_residual_corr']:.3f}, c0 {fit['c0']:.3f}, c1 {fit['c1']:.3f})")
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
        data: The dataset they should have been trained on.
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
        if os.path.normpath(trained_on) != os.path.normpath(os.path.relpath(data, REPO)):
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


def _refuse_trained_on(checkpoints: list[str], names: list[str],
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


def _describe(cfg) -> str:
    """One line on how a checkpoint adapts."""
    lr = "learned step sizes (Meta-SGD)" if cfg.meta_sgd else f"lr {cfg.lr}"
    scope = {"head": "the head", "last_gcn": "the head and the last GCN layer",
             "all": "every layer"}.get(cfg.scope, cfg.scope)
    context = f", then a support-set attention (width {cfg.context})" if cfg.context else ""
    return f"{scope}, {cfg.steps} steps, {lr}, {cfg.loss} loss{context}"


def _scale(calibration: dict | None) -> str:
    """How a checkpoint's zero-shot scale was set (empty for none)."""
    if not calibration:
        return ""
    return (f"; zero-shot scale calibrated on {calibration['workloads']} validation workloads "
            f"(x {calibration['slope']:.3f} + {calibration['intercept']:.3f})")


def main(argv: list[str] | None = None, command: str | None = None) -> dict:
    """Run the comparison (command-line arguments ``argv``); returns the JSON document.

    Args:
        argv: The arguments (``None``: the command line's).
        command: The command to record (a script that calls this one passes its own).
    """
    args = _parse(argv)
    os.chdir(REPO)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from metatune.config import default_checkpoint
    from tuner.app.accuracy import (BlendMethod, EnsembleMethod, GPMethod, KnobXGBMethod,
                                    MetaTuneMethod, RidgeMethod, XGBMethod, evaluate,
                                    load_eval_workloads, load_split_workloads, summarize)
    from metatune.provenance import simd_flags
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.runtime import runtime_info
    from tuner.engine.targets import resolve_target
    from tuner.models.cost_model import load_model
    from metatune.dataset import workload_order
    from tuner.models.xgb_transfer import base_booster

    dataset = os.path.basename(os.path.normpath(args.data))
    specs = [m.split("=", 1) for m in args.model] or [
        ["metatune-super", default_checkpoint(dataset, graph="super")],
        ["metatune-plain", default_checkpoint(dataset, graph="plain")]]
    val = args.split == "val"
    fold = args.split.startswith("train-networks")
    if fold and not args.networks:
        raise SystemExit(f"--split {args.split}: name the networks the checkpoints left out "
                         "(--networks ...; train.py data.leave_out_networks=[...]); "
                         "xgb-Xfer's base model leaves them out too")
    unknown = sorted(set(args.compiled_correction or ()) - {n for n, _ in specs})
    if unknown:
        raise SystemExit(f"--compiled-correction {' '.join(unknown)}: not a --model NAME "
                         f"(they are: {', '.join(n for n, _ in specs)})")
    if val and args.compiled_correction is not None:
        raise SystemExit("--split val: the compiled-code correction is fitted on these "
                         "workloads; score it on held-out ones")
    if val and not args.no_xgb:
        raise SystemExit("--split val: xgb-Xfer's base model is trained on the whole training "
                         "split, these workloads included; pass --no-xgb")
    split_dir = os.path.join(args.data, "train" if val else args.split)
    info = resolve_target(data_target(split_dir))
    load_tensor_intrinsics((info.kind,))
    models = {name: load_model(path, graph=None) for name, path in specs}
    for model in models.values():
        model.inner.override(steps=args.adapt_steps, lr=args.adapt_lr,
                             scope=args.adapt_scope, net=model.net)
    start = time.perf_counter()
    modes = tuple(sorted({m.graph for m in models.values()}))
    if val:  # from every training split the checkpoints drew them from
        names, splits = validation_workloads([p for _, p in specs], args.data)
        listed = {w["name"] for sp in splits
                  for w in workload_order(os.path.join(args.data, sp))}
        if set(names) - listed:
            raise SystemExit(f"--split val: {len(set(names) - listed)} validation workloads "
                             f"of the checkpoints are in none of {', '.join(splits)} of "
                             f"{args.data} (e.g. {sorted(set(names) - listed)[0]})")
        seen = _refuse_trained_on([p for _, p in specs], names, args.seen_ok)
        workloads = load_split_workloads(args.data, splits, modes,
                                         args.query + max(args.ks), names, args.limit)
    else:
        names = network_workloads(split_dir, args.networks) if args.networks else None
        workloads = load_eval_workloads(split_dir, modes, min_samples=args.query + max(args.ks),
                                        limit=args.limit, names=names)
    if not workloads:
        raise SystemExit(f"no {args.split} workload has {args.query + max(args.ks)} valid "
                         "samples: lower --query or the largest of --ks")
    if not val:
        seen = _refuse_trained_on([p for _, p in specs], [w.name for w in workloads],
                                  args.seen_ok)
    logging.info("%d %s workloads loaded in %.0f s", len(workloads), args.split,
                 time.perf_counter() - start)
    methods = {name: MetaTuneMethod(model) for name, model in models.items()}
    notes = {name: f"`{os.path.relpath(path, REPO)}`: {models[name].graph} graph, adapts "
                   f"{_describe(models[name].inner.cfg)}{_scale(models[name].calibration)}"
                   + (f"; **trained on {seen[path]} of the {len(workloads)} scored workloads** "
                      "(by name, measured elsewhere)" if path in seen else "")
             for name, path in specs}
    if args.gp_embed:
        for name in list(models):
            methods[f"{name}+gp-embed"] = GPMethod(methods[name], features="embed")
            notes[f"{name}+gp-embed"] = (f"`{name}` adapted, then a GP over its graph "
                                         "embeddings (standardized) with its prediction as "
                                         "prior mean, fitted on the k samples (experiment)")
    if args.gp:
        for name, kernel in itertools.product(list(models), args.gp_kernel):
            key = f"{name}+gp" + ("" if kernel == "knobs" else "-prior")
            methods[key] = GPMethod(methods[name], kernel=kernel)
            notes[key] = (f"`{name}` adapted, then the batch BO search's GP over knob vectors"
                          + (" and the prediction" if kernel != "knobs" else "")
                          + " with its prediction as prior mean, fitted on the k samples: how "
                          f"the tuner ranks candidates with `search_params.bo.kernel={kernel}`")
    if args.ridge:
        for name, lam in itertools.product(list(models), args.ridge_lam):
            key = f"{name}+ridge" + (f"-{lam:g}" if len(args.ridge_lam) > 1 else "")
            methods[key] = RidgeMethod(methods[name], lam=lam)
            notes[key] = (f"`{name}` adapted, shifted to the support mean, plus a ridge "
                          f"regression (penalty {lam:g}) over standardized knob vectors fitted "
                          "on its residuals on the k samples (experiment)")
        methods["xgb-knobs"] = KnobXGBMethod()
        notes["xgb-knobs"] = ("XGBoost (50 rounds, depth 3) on the knob vectors, from scratch "
                              "on the k samples (experiment; random at k=0)")
    corrections = {}
    if args.compiled_correction is not None:
        from compiled_correction import (CompiledCorrectionMethod, fit_correction,
                                         split_features, validation_items,
                                         validation_target)

        features = split_features(split_dir, workloads, info.target, args.compiled_cache)
        train_data = args.train_data or args.data
        for name, path in specs:
            if args.compiled_correction and name not in args.compiled_correction:
                continue
            val_names, val_splits = validation_workloads([path], train_data,
                                                         "--compiled-correction")
            try:
                val_target = validation_target(train_data, val_splits, args.data, info.target)
            except ValueError as err:
                raise SystemExit(f"--compiled-correction, {path}: {err}") from err
            clash = sorted(set(val_names) & {w.name for w in workloads})
            if clash:
                raise SystemExit(f"--compiled-correction: {len(clash)} scored workloads are "
                                 f"validation workloads of {path} (e.g. {clash[0]}), which the "
                                 "correction is fitted on: score held-out ones")
            items = validation_items(methods[name], val_names, val_splits, train_data,
                                     val_target, args.compiled_cache,
                                     lambda msg: logging.info("%s", msg))
            for n, fit_seed in enumerate(args.compiled_fit_seeds):
                try:
                    fit = fit_correction(items, seed=fit_seed)
                except ValueError as err:
                    raise SystemExit(f"--compiled-correction, {path}: {err}") from err
                key = f"{name}+asm" + (f"-fit{fit_seed}" if n else "")
                corrections[key] = {"fit_seed": fit_seed, **fit.stats}
                methods[key] = CompiledCorrectionMethod(methods[name], fit, features)
                notes[key] = (f"`{name}` adapted, plus boosted trees' guess of its miss from "
                              "the compiled code, fitted on the checkpoint's validation "
                              f"workloads (fold seed {fit_seed}, weight {fit.weight:.3f}; "
                              "experiment, `bench/compiled_correction.py`)")
                if not n:
                    methods[f"{key}-local"] = CompiledCorrectionMethod(
                        methods[name], fit, features, local=args.compiled_local)
                    notes[f"{key}-local"] = (f"`{key}` with the guess's weight refitted on the "
                                             "k samples, pooled with the global one as if seen "
                                             f"on {args.compiled_local:g} more (not tuned)")
    local_xgb = XGBMethod(info.target, info.num_cores)  # shared: the blends reuse its scores
    for name, k0 in itertools.product(list(models), args.blend_xgb):
        key = f"{name}+xgb" + (f"-{k0:g}" if len(args.blend_xgb) > 1 else "")
        methods[key] = BlendMethod(methods[name], local_xgb, k0=k0)
        notes[key] = (f"`{name}` adapted, blended with `xgb` trained on the k samples, "
                      f"weighted k / (k + {k0:g}) (the model alone at k = 0)")
    if not args.no_xgb:
        base = base_booster([os.path.join(args.train_data or args.data, sp)
                             for sp in args.xfer_splits or ["train"]], info.target,
                            info.num_cores, args.cache_dir,
                            leave_out_networks=args.networks if fold else ())
        if fold:
            notes["xgb-Xfer"] = (METHOD_NOTES["xgb-Xfer"] + "; its base model trained "
                                 "without the workloads of " + ", ".join(args.networks))
        methods.update({"xgb": local_xgb,
                        "xgb-Xfer": XGBMethod(info.target, info.num_cores, base)})
    for name, members in _ensembles(args.ensemble, methods):
        methods[name] = EnsembleMethod([methods[m] for m in members])
        notes[name] = "the mean of " + ", ".join(f"`{m}`" for m in members) + "'s scores"
    rows = evaluate(workloads, methods, tuple(args.ks), args.seeds, args.query,
                    progress=lambda msg: logging.info("done %s", msg))
    doc = {
        **provenance("model_accuracy.py"), **({"command": command} if command else {}),
        "title": args.title, "data": args.data, "split": args.split,
        "train_data": args.train_data or args.data, "xfer_splits": args.xfer_splits or ["train"],
        "target": info.description,
        "runtime": runtime_info(info.num_cores), "cpu_flags": simd_flags(),
        "workloads": len(workloads), "networks": args.networks, "query": args.query,
        "seeds": args.seeds,
        "notes": notes,
        "adapt": {name: m.inner.cfg.to_dict() for name, m in models.items()},
        **({"compiled_corrections": corrections} if corrections else {}),
        "seconds": round(time.perf_counter() - start, 1),
        "summary": summarize(rows),
        # every (method, k, seed, workload) score, compact: one list per row
        "row_columns": list(rows[0]) if rows else [],
        "rows": [[round(v, 4) if isinstance(v, float) else v for v in r.values()]
                 for r in rows],
    }
    write_results(args.out + ".json", args.out + ".md", doc, _markdown(doc), rows_key="rows")
    return doc


if __name__ == "__main__":
    main()
