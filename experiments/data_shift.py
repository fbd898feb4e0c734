# Last ran on commit 1ef52a3
"""Is the training split the right data? Zero-shot ranking of each held-out network's
convolutions by a model trained on the generated workloads or on other networks' convs.

A cost model trained on the generated training split (``train``: the paper's Table 2
shapes) ranks the held-out network convolutions at 0.60-0.68 pairwise before it has
measured anything (``docs/lab/cost-model/model-accuracy.md``), while another CPU's measured
run times of the same schedules rank them at 0.77-0.86
(``docs/lab/cost-model/ranking-ceiling.md``). This asks how much of the gap is the training
data's distribution: leaving one network out at a time,
MetaSchedule's XGBoost (the per-store features and objective of xgb-Xfer's base model,
:func:`tuner.models.xgb_transfer.train_base_booster`) is trained on

- ``generated``: the training split (what xgb-Xfer and the shipped checkpoints train on),
- ``other-networks``: the held-out split's convolutions of the other three networks,
- ``both``: the two together,

and scores the left-out network's convolutions with no sample of them (pairwise ranking
accuracy and top-5 recall, :mod:`metatune.metrics`, over every measured schedule). A
diagnostic: the held-out convs are never trained on for a shipped model; the question is
whether network-like training workloads (other networks' convs) would rank better than the
generated ones. No measurement is made; the run times are the dataset's own.

With ``--gcn NETWORK...`` the same question is asked of MetaTune's GCN, with its own
recipe and metrics: ``train.py`` (pre-training + MAML, defaults) on the training split plus
the held-out convs of every network not named (a derived dataset under ``--work``: links
to the data, the held-out split's ``meta.json`` pruned), then ``model_accuracy.py
--networks NETWORK...`` scores the named networks' convs at k = 0..64 beside the shipped
checkpoint (trained on the training split alone), xgb and xgb-Xfer. Resumable: a fold's
checkpoint is kept and reused.

Usage:
    python -m experiments.data_shift                      # data/llvm-icelake-server, ~7 minutes
    python -m experiments.data_shift --data data/llvm-znver4 --train-data data/llvm-icelake-server
    python -m experiments.data_shift --gcn alexnet vgg-16  # one fold: ~20 min training, ~5 scoring
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections import defaultdict

import numpy as np

from bench.common import REPO, provenance, write_results
from metatune import metrics
from metatune.config import DEFAULT_DATA_DIR

SOURCES = ("generated", "other-networks", "both")
#: The derived dataset's split of the other networks' held-out convs (``--gcn``).
OTHERS_SPLIT = "train-other-networks"
#: One workload's per-store features (one array per schedule) and measured seconds.
Group = tuple[list[np.ndarray], np.ndarray]


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.relpath(DEFAULT_DATA_DIR, REPO),
                   help="the dataset whose held-out split is scored (and left out in turn)")
    p.add_argument("--train-data", help="the dataset whose training split is 'generated' "
                                        "(default: --data)")
    p.add_argument("--cache-dir", default="work/cache")
    p.add_argument("--out", default="docs/lab/cost-model/data-shift")
    p.add_argument("--gcn", nargs="+", metavar="NETWORK",
                   help="train the GCN on the training split plus every other network's "
                        "held-out convs and score these networks' convs (see above)")
    p.add_argument("--graph", default="super", choices=("super", "plain"),
                   help="--gcn: the graph mode trained and compared")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                   help="--gcn: model_accuracy.py's seeds")
    p.add_argument("--work", default="work/data-shift",
                   help="--gcn: where the derived datasets and fold checkpoints are kept")
    p.add_argument("train_overrides", nargs="*",
                   help="--gcn: train.py overrides for the fold's training, after '--' "
                        "(e.g. --gcn alexnet -- meta.steps=0)")
    return p.parse_args(argv)


def split_features(split_dir: str, cache_dir: str) -> dict[str, Group]:
    """Per workload, the per-store features of every valid record of a split (as
    MetaSchedule's ``XGBModel`` extracts them) and its measured seconds; cached.

    Args:
        split_dir: ``data/<platform>/<split>``.
        cache_dir: Where the features are kept, keyed by the split's files.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.cost_model import XGBModel

    from metatune.dataset import iter_replayed, split_fingerprint
    from tuner.engine.database import as_candidate
    from tuner.models.xgb_transfer import candidate_features

    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, f"features-{split_fingerprint(split_dir)}.npz")
    if os.path.isfile(path):
        return np.load(path, allow_pickle=True)["groups"].item()
    with open(os.path.join(split_dir, "meta.json"), encoding="utf-8") as f:
        target = tvm.target.Target(json.loads(json.load(f)["settings"]["target"]))
    items: dict[str, list] = defaultdict(list)
    for item in iter_replayed(split_dir):
        items[item.info["name"]].append(item)
    model = XGBModel(num_warmup_samples=0, num_tuning_cores=2, verbose_eval=0)
    groups = {}
    for name, its in items.items():
        ctx = ms.TuneContext(mod=its[0].workload.mod, target=target)
        groups[name] = (candidate_features(model, ctx, [as_candidate(i.sch) for i in its]),
                        np.array([i.seconds for i in its]))
    np.savez(path, groups=np.array(groups, dtype=object))
    return groups


def zero_shot(train: dict[str, Group], test: dict[str, Group]) -> dict[str, list[float]]:
    """Train MetaSchedule's XGBoost on ``train`` (targets: each workload's best run time over
    the schedule's, as :func:`tuner.models.xgb_transfer.train_base_booster`) and score each
    workload of ``test`` with no sample of it.

    Returns:
        ``{"pairwise": [...], "top5_recall": [...]}``, one value per test workload.
    """
    from tvm.s_tir.meta_schedule.cost_model import XGBModel

    model = XGBModel(num_warmup_samples=0, num_tuning_cores=2, verbose_eval=0)
    xs = [x for feats, _ in train.values() for x in feats]
    model._train(xs, np.concatenate([s.min() / s for _, s in train.values()]))
    out: dict[str, list[float]] = {"pairwise": [], "top5_recall": []}
    for feats, secs in test.values():
        pred = model._predict(feats)
        out["pairwise"].append(metrics.pairwise_accuracy(pred, 1.0 / secs))
        out["top5_recall"].append(metrics.top_k_recall(pred, 1.0 / secs))
    return out


def leave_one_network_out(generated: dict[str, Group], heldout: dict[str, Group]) -> dict:
    """Each network of the held-out split scored by models trained on each source.

    Returns:
        ``{network: {source: {"workloads", "pairwise", "top5_recall"}}}`` (means over the
        network's workloads), plus ``"all"``: the means over every held-out workload.
    """
    networks = sorted({name.split("/")[0] for name in heldout})
    out: dict = {}
    pooled: dict[str, dict[str, list[float]]] = {s: {"pairwise": [], "top5_recall": []}
                                                 for s in SOURCES}
    for net in networks:
        test = {n: g for n, g in heldout.items() if n.split("/")[0] == net}
        others = {n: g for n, g in heldout.items() if n.split("/")[0] != net}
        train = {"generated": generated, "other-networks": others,
                 "both": {**generated, **others}}
        out[net] = {}
        for source in SOURCES:
            scores = zero_shot(train[source], test)
            for key, values in scores.items():
                pooled[source][key] += values
            out[net][source] = {"workloads": len(test),
                                **{k: float(np.mean(v)) for k, v in scores.items()}}
            print(net, source, out[net][source], flush=True)
    out["all"] = {s: {"workloads": len(v["pairwise"]),
                      **{k: float(np.mean(x)) for k, x in v.items()}}
                  for s, v in pooled.items()}
    return out


def markdown(doc: dict) -> str:
    lines = ["# Zero-shot ranking of each held-out network by generated vs network training "
             "workloads", "", f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- computed on: {doc['machine']}", f"- held-out split: `{doc['data']}/heldout` "
             f"({doc['heldout_target']}); 'generated': `{doc['train_data']}/train`",
             "- model: MetaSchedule XGBModel (per-store features; xgb-Xfer's base model), "
             "trained once per (left-out network, source); each cell: the mean over the "
             "left-out network's convolutions, every measured schedule ranked with no "
             "sample of it", "",
             "| left-out network | convs | " + " | ".join(
                 f"{s}: pairwise | {s}: top-5" for s in SOURCES) + " |",
             "|---|---|" + "---|---|" * len(SOURCES)]
    for net, row in doc["results"].items():
        cells = " | ".join(f"{row[s]['pairwise']:.3f} | {row[s]['top5_recall']:.3f}"
                           for s in SOURCES)
        name = "**all**" if net == "all" else net
        lines.append(f"| {name} | {row[SOURCES[0]]['workloads']} | {cells} |")
    lines.append("")
    return "\n".join(lines)


def fold_data_dir(data: str, left_out: list[str], root: str) -> str:
    """A dataset to train on without ``left_out``'s convs: ``train`` (a link to ``data``'s)
    and :data:`OTHERS_SPLIT`, the held-out split's files linked with a ``meta.json`` that
    lists only the other networks' workloads (records of unlisted workloads are skipped
    when a split is read). Rewritten only when it changes, so the graph cache holds.

    Args:
        data: ``data/<platform>`` with ``train`` and ``heldout``.
        left_out: Networks whose convs are left out (``meta.json``'s ``networks``).
        root: Where the fold's dataset goes (``<root>/<networks joined by '-'>``).

    Raises:
        SystemExit: A network the held-out split has no workload of.
    """
    heldout = os.path.abspath(os.path.join(data, "heldout"))
    with open(os.path.join(heldout, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    known = {n for w in meta["workloads"] for n in w.get("networks", [])}
    if set(left_out) - known:
        raise SystemExit(f"--gcn {' '.join(sorted(set(left_out) - known))}: not a network of "
                         f"{heldout} (its networks: {', '.join(sorted(known))})")
    fold = os.path.join(root, "-".join(sorted(left_out)))
    others = os.path.join(fold, OTHERS_SPLIT)
    os.makedirs(others, exist_ok=True)
    links = {os.path.join(fold, "train"): os.path.abspath(os.path.join(data, "train"))}
    links.update({os.path.join(others, name): os.path.join(heldout, name)
                  for name in os.listdir(heldout) if name != "meta.json"})
    for link, target in links.items():
        if not os.path.lexists(link):
            os.symlink(target, link)
    meta["split"] = OTHERS_SPLIT
    meta["workloads"] = [w for w in meta["workloads"]
                         if not set(w.get("networks", [])) & set(left_out)]
    text = json.dumps(meta, indent=1)
    path = os.path.join(others, "meta.json")
    if not os.path.isfile(path) or open(path, encoding="utf-8").read() != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return fold


def train_fold(fold: str, graph: str, overrides: list[str]) -> str:
    """Train ``train.py``'s recipe on a :func:`fold_data_dir` dataset (both its splits);
    a checkpoint already there is reused. Returns the checkpoint's path."""
    from lightning_modules.app import run_train
    from lightning_modules.config import load_train_config

    ckpt = os.path.join(fold, f"{graph}.ckpt")
    if not os.path.isfile(ckpt):
        run_train(load_train_config(overrides=[
            f"data_dir={fold}", f"data.splits=[train,{OTHERS_SPLIT}]", f"graph={graph}",
            f"out={ckpt}", f"log_dir={os.path.join(fold, 'runs')}", *overrides]))
    return ckpt


def gcn_fold(args: argparse.Namespace, command: str) -> None:
    """``--gcn``: train the fold's GCN and score the left-out networks' convs beside the
    shipped checkpoint (``model_accuracy.py --networks``; the page records ``command``)."""
    from bench import model_accuracy
    from metatune.config import default_checkpoint

    fold = fold_data_dir(args.data, args.gcn, args.work)
    ckpt = train_fold(fold, args.graph, args.train_overrides)
    dataset = os.path.basename(os.path.normpath(args.data))
    nets = "-".join(sorted(args.gcn))
    model_accuracy.main([
        "--data", args.data, "--networks", *args.gcn, "--seeds", *map(str, args.seeds),
        "--model", f"{args.graph}-generated={default_checkpoint(dataset, graph=args.graph)}",
        "--model", f"{args.graph}-generated+other-networks={ckpt}",
        "--cache-dir", args.cache_dir, "--out", f"{args.out}-gcn-{nets}",
        "--title", f"Held-out convs of {', '.join(args.gcn)}: the GCN trained with and "
                   "without the other networks' convs"],
        command=command)


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    if args.gcn:
        return gcn_fold(args, "python -m experiments.data_shift " + shlex.join(
            sys.argv[1:] if argv is None else argv))
    train_data = args.train_data or args.data
    for path in (os.path.join(train_data, "train"), os.path.join(args.data, "heldout")):
        if not os.path.isfile(os.path.join(path, "meta.json")):
            raise SystemExit(f"{path}/meta.json not found: collect the split first "
                             "(python collect.py run)")
    generated = split_features(os.path.join(train_data, "train"), args.cache_dir)
    heldout = split_features(os.path.join(args.data, "heldout"), args.cache_dir)
    with open(os.path.join(args.data, "heldout", "meta.json"), encoding="utf-8") as f:
        heldout_target = json.load(f)["target_description"]
    doc = {**provenance("experiments.data_shift"), "data": args.data, "train_data": train_data,
           "heldout_target": heldout_target,
           "results": leave_one_network_out(generated, heldout)}
    write_results(args.out + ".json", args.out + ".md", doc, markdown(doc))


if __name__ == "__main__":
    main()
