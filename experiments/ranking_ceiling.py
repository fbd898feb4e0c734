# Last ran on commit 591af28
"""How well one platform's measured order ranks another's: a reference for the cost model.

The held-out splits of the datasets measured on different platforms hold mostly the same
schedules (the collector draws them with the same seeds). For every held-out workload, the
schedules measured on both platforms are ranked by one platform's measured throughput and
scored against the other's with the metrics of ``bench.model_accuracy`` (pairwise
ranking accuracy, top-5 recall). This is what a cost model that knew every run time on
another CPU would reach, with that CPU's measurement noise included: an upper reference
for a model transferred across CPUs, and a lower bound on how rankable a split is at all
(measurement noise alone would cap it). No measurement is made; the run times are the
datasets' own.

With one CPU's split measured twice (``collect.py run out=...`` into a second dataset:
the same seeds draw the same schedules), the row is the measurement noise itself.

Usage:
    python -m experiments.ranking_ceiling                      # every pair of data/llvm-* datasets
    python -m experiments.ranking_ceiling --data data/llvm-icelake-server data/llvm-znver4
    python -m experiments.ranking_ceiling --data data/llvm-znver4 data/llvm-znver4-repeat \
        --split heldout-nhwc --out docs/lab/cost-model/ranking-noise-znver4
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
from collections.abc import Iterator

import numpy as np

from bench.accuracy.workloads import split_indices
from bench.common import provenance, write_results
from metatune import metrics
from metatune.dataset import workload_entries
from metatune.records import iter_records


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", nargs="+",
                   help="datasets to compare pairwise (default: every data/llvm-* with the split)")
    p.add_argument("--split", default="heldout", help="the split to compare (default heldout)")
    p.add_argument("--min-shared", type=int, default=16,
                   help="workloads with fewer schedules measured on both are skipped")
    p.add_argument("--query", type=int, default=0,
                   help="score random subsets of this many schedules per workload and seed, "
                        "as bench.model_accuracy's query sets (0: all shared schedules)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                   help="the subsets' seeds (with --query)")
    p.add_argument("--out", default="docs/lab/cost-model/ranking-ceiling")
    return p.parse_args(argv)


def valid_records(split_dir: str) -> Iterator[tuple[str, str, float]]:
    """A split's valid records in file order (the order
    :func:`metatune.dataset.iter_replayed` replays them), as ``(workload name, trace JSON,
    mean seconds)``; records of a workload ``meta.json`` does not list are skipped."""
    names = [info["name"] if info else None for info, _ in workload_entries(split_dir)]
    for rec in iter_records(split_dir):
        name = names[rec.workload] if rec.workload < len(names) else None
        if rec.valid and name is not None:
            yield name, json.dumps(rec.trace, sort_keys=True), rec.mean_seconds


def measured_times(split_dir: str) -> tuple[dict[str, dict[str, float]], str]:
    """Every valid record's mean run time, by workload name and trace.

    Args:
        split_dir: ``data/<platform>/<split>`` with ``meta.json`` and its database.

    Returns:
        ``({workload name: {trace JSON: seconds}}, target description)``.
    """
    with open(os.path.join(split_dir, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    times: dict[str, dict[str, float]] = {}
    for name, trace, seconds in valid_records(split_dir):
        times.setdefault(name, {})[trace] = seconds
    return times, meta.get("target_description", os.path.basename(os.path.dirname(split_dir)))


def agreement(ref: dict[str, dict[str, float]], other: dict[str, dict[str, float]],
              min_shared: int, query: int = 0, seeds: tuple[int, ...] = (0,)) -> dict:
    """Score ``other``'s measured throughput as a ranking of ``ref``'s, workload by workload.

    Args:
        ref, other: :func:`measured_times` of two platforms' split.
        min_shared: Workloads with fewer schedules measured on both are skipped.
        query: Above 0: score, per seed, a random subset of this many shared schedules
            (:func:`bench.accuracy.split_indices`' query set, as the cost models are
            scored) and average over the seeds; 0: all shared schedules at once.
        seeds: The subsets' seeds.

    Returns:
        ``{"workloads", "shared_samples", "pairwise", "top5_recall",
        "pairwise_min", "pairwise_max"}``: means over the workloads compared, or ``None``
        metrics when no workload has enough shared schedules.
    """
    pairwise, top5, shared = [], [], 0
    for name in sorted(set(ref) & set(other)):
        traces = [t for t in ref[name] if t in other[name]]
        if len(traces) < min_shared:
            continue
        truth = np.array([1.0 / ref[name][t] for t in traces])
        guess = np.array([1.0 / other[name][t] for t in traces])
        subsets = ([split_indices(len(traces), 0, query, seed)[1] for seed in seeds]
                   if query else [np.arange(len(traces))])
        pairwise.append(np.mean([metrics.pairwise_accuracy(guess[i], truth[i]) for i in subsets]))
        top5.append(np.mean([metrics.top_k_recall(guess[i], truth[i]) for i in subsets]))
        shared += len(traces)
    if not pairwise:
        return {"workloads": 0, "shared_samples": 0, "pairwise": None, "top5_recall": None,
                "pairwise_min": None, "pairwise_max": None}
    return {"workloads": len(pairwise), "shared_samples": shared,
            "pairwise": float(np.mean(pairwise)), "top5_recall": float(np.mean(top5)),
            "pairwise_min": float(np.min(pairwise)), "pairwise_max": float(np.max(pairwise))}


def markdown(doc: dict) -> str:
    lines = ["# How well one platform's measured order ranks another's (held-out schedules)",
             "", f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- computed on: {doc['machine']} (nothing is measured: the run times are the "
             "datasets' own, each measured where its `meta.json` says)",
             f"- split: `{doc['split']}`; a workload counts when at least {doc['min_shared']} "
             "of its schedules were measured on both platforms; each cell is the mean over "
             "workloads (min-max of pairwise in brackets); both metrics are symmetric: A's "
             "run times ranked by B's score as B's by A's; " + (
                 f"scored on random subsets of {doc['query']} of a workload's shared "
                 f"schedules (seeds {doc['seeds']}, mean over them), the size of the cost "
                 "models' query sets" if doc.get("query")
                 else "scored on all shared schedules of a workload"), "",
             "| platform A | platform B | workloads | shared schedules | "
             "pairwise | top-5 recall |", "|---|---|---|---|---|---|"]
    for row in doc["rows"]:
        if row["pairwise"] is None:
            lines.append(f"| {row['a']} | {row['b']} | 0 | 0 | - | - |")
            continue
        lines.append(
            f"| {row['a']} | {row['b']} | {row['workloads']} | "
            f"{row['shared_samples']} | {row['pairwise']:.3f} ({row['pairwise_min']:.3f}-"
            f"{row['pairwise_max']:.3f}) | {row['top5_recall']:.3f} |")
    lines += ["", "Read: a cost model that knew every run time measured on the other platform "
              "would rank this well; measurement noise alone caps no split below these "
              "figures. Compare the cost models' pairwise accuracy on the same held-out "
              "convolutions in `model-accuracy*.md`."]
    if any(row["same_target"] for row in doc["rows"]):
        lines += ["", "A row of one target twice (the split measured again on the same kind "
                  "of CPU) is the measurement noise itself: each measurement's order scored "
                  "against the other's, both noisy. A model that knew the noise-free run "
                  "times would score above that figure against either measurement (it "
                  "carries one measurement's noise, not two), so the figure is a lower "
                  "bound on what noise leaves reachable, not the ceiling."]
    return "\n".join(lines + [""])


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    data = args.data or sorted(d for d in glob.glob("data/llvm-*")
                               if os.path.isfile(os.path.join(d, args.split, "meta.json")))
    if len(data) < 2:
        raise SystemExit(f"need two datasets with a {args.split} split, found {data}: "
                         "collect one (python collect.py run splits=[heldout])")
    loaded = {d: measured_times(os.path.join(d, args.split)) for d in data}
    rows = []
    for ref, other in itertools.combinations(data, 2):
        row = agreement(loaded[ref][0], loaded[other][0], args.min_shared, args.query,
                        tuple(args.seeds))
        rows.append({"a": f"`{ref}` ({loaded[ref][1]})",
                     "b": f"`{other}` ({loaded[other][1]})",
                     "same_target": loaded[ref][1] == loaded[other][1], **row})
    doc = {**provenance("experiments.ranking_ceiling"), "split": args.split,
           "min_shared": args.min_shared, "query": args.query,
           "seeds": args.seeds if args.query else None, "rows": rows}
    write_results(args.out + ".json", args.out + ".md", doc, markdown(doc))


if __name__ == "__main__":
    main()
