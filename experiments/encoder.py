# Last ran on commit 591af28
"""Encoder throughput: candidates per second for a resnet-18 convolution, one thread.

Draws random, postprocessed candidates of resnet-18's ``fused_conv2d1_add1_relu11``
(64->64 3x3 conv at 56x56) from MetaSchedule's design space, then times
``metatune.graph.encode`` on them in both graph modes, in this one process. With
``--baseline REV`` the encoder of that git revision (``metatune/loopnest.py`` and
``metatune/graph.py`` as they were there) is timed side by side, in alternating repeats
on the same candidates, and the two encoders' graphs are compared (the largest feature
difference, and whether every edge list is the same).

Usage:
    python -m experiments.encoder --candidates 256 --baseline 41262fe \
        --out docs/lab/cost-model/encoder.json --markdown docs/lab/cost-model/encoder.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench.common import REPO, provenance

TASK = "fused_conv2d1_add1_relu11"
MODES = ("plain", "super")


def candidates(n: int, seed: int) -> list:
    """``n`` random postprocessed scheduled functions of the benchmark task."""
    from tvm.s_tir import meta_schedule as ms

    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.networks import load_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    info = resolve_target("llvm")
    load_tensor_intrinsics(("llvm",))
    task = next(t for t in extract_tasks(load_network("resnet-18").relax_mod, info.target)
                if t.name == TASK)
    ctx = ms.TuneContext(mod=task.extracted.dispatched[0], target=info.target,
                         space_generator="post-order-apply", search_strategy="replay-trace",
                         rand_state=seed, num_threads=1)
    ctx.pre_tuning(max_trials=n, num_trials_per_iter=n,
                   design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(), cost_model=None)
    return [c.sch.mod["main"] for c in ctx.generate_measure_candidates()]


def baseline_encode(rev: str):
    """``encode`` of the encoder at git revision ``rev`` (its loop-nest reader and graph
    builder loaded as private modules beside this tree's)."""
    names = {"loopnest": "_baseline_loopnest", "graph": "_baseline_graph"}
    with tempfile.TemporaryDirectory(prefix="encoder-baseline-") as tmp:
        for part, name in names.items():
            text = subprocess.run(["git", "-C", REPO, "show", f"{rev}:metatune/{part}.py"],
                                  check=True, capture_output=True, text=True).stdout
            with open(os.path.join(tmp, f"{name}.py"), "w", encoding="utf-8") as f:
                f.write(text.replace("from metatune.loopnest import",
                                     f"from {names['loopnest']} import"))
        for part in names:  # loopnest first: graph imports it under its private name
            spec = importlib.util.spec_from_file_location(
                names[part], os.path.join(tmp, f"{names[part]}.py"))
            module = importlib.util.module_from_spec(spec)
            sys.modules[names[part]] = module
            spec.loader.exec_module(module)  # run while the files exist
    return module.encode


def compare(funcs: list, encoders: dict) -> dict:
    """The largest absolute feature difference between the two encoders' graphs, and
    whether every edge list and node count agrees, per mode."""
    import torch

    (_, a), (_, b) = encoders.items()
    out = {}
    for mode in MODES:
        worst, same, equal = 0.0, True, True
        for f in funcs:
            ga, gb = a(f, mode), b(f, mode)
            same &= (ga.x.shape == gb.x.shape and torch.equal(ga.edge_index, gb.edge_index)
                     and torch.equal(ga.edge_type, gb.edge_type))
            if ga.x.shape == gb.x.shape:
                equal &= torch.equal(ga.x, gb.x)  # NaN-safe: a NaN anywhere is unequal
                worst = max(worst, float((ga.x - gb.x).abs().nan_to_num(float("inf")).max()))
            else:
                equal = False
        out[mode] = {"max_abs_feature_diff": worst, "same_edges_and_nodes": bool(same),
                     "identical_features": bool(equal)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--candidates", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--baseline", help="a git revision whose encoder is timed side by side")
    p.add_argument("--out", default="docs/lab/cost-model/encoder.json")
    p.add_argument("--markdown", default="docs/lab/cost-model/encoder.md")
    args = p.parse_args()
    import torch

    from metatune.graph import encode

    torch.set_num_threads(1)
    prov = provenance("experiments.encoder")
    funcs = candidates(args.candidates, args.seed)
    encoders = {"this tree": encode}
    if args.baseline:
        encoders = {f"baseline `{args.baseline}`": baseline_encode(args.baseline), **encoders}
    rates: dict[str, dict[str, list[float]]] = {name: {} for name in encoders}
    for mode in MODES:
        for enc in encoders.values():
            enc(funcs[0], mode)  # warm-up (imports)
        for _ in range(args.repeats):  # alternate, so that drifts hit both alike
            for name, enc in encoders.items():
                start = time.perf_counter()
                for f in funcs:
                    enc(f, mode)
                rates[name].setdefault(mode, []).append(len(funcs) / (time.perf_counter() - start))
    medians = {name: {m: statistics.median(r) for m, r in by_mode.items()}
               for name, by_mode in rates.items()}
    doc = {**prov, "task": TASK, "candidates": len(funcs), "repeats": args.repeats,
           "threads": "one (torch.set_num_threads(1); encoding is Python on one core)",
           "candidates_per_second": medians, "runs": rates}
    if args.baseline:
        doc["agreement"] = compare(funcs, encoders)
        doc["speedup"] = {m: medians["this tree"][m] / medians[f"baseline `{args.baseline}`"][m]
                          for m in MODES}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    lines = ["# Graph encoder throughput", "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']}; encoding timed on one thread",
             f"- {len(funcs)} random postprocessed candidates of resnet-18 `{TASK}`; median "
             f"of {args.repeats} repeats" + (", the encoders alternating" if args.baseline else ""),
             "", "| encoder | " + " | ".join(f"{m} (candidates/s)" for m in MODES) + " |",
             "|---|" + "---|" * len(MODES)]
    lines += [f"| {name} | " + " | ".join(f"{medians[name][m]:.0f}" for m in MODES) + " |"
              for name in encoders]
    if args.baseline:
        lines.append("| speed-up | " + " | ".join(f"{doc['speedup'][m]:.2f}x" for m in MODES)
                     + " |")
        agree = doc["agreement"]
        same = all(a["identical_features"] and a["same_edges_and_nodes"] for a in agree.values())
        lines += ["", ("The two encoders give identical graphs on these candidates: "
                       if same else "**The two encoders' graphs differ**: ") + "; ".join(
            f"{m}: features {'equal' if a['identical_features'] else 'unequal'} (largest "
            f"difference {a['max_abs_feature_diff']:.1e}), edges and node counts "
            f"{'equal' if a['same_edges_and_nodes'] else 'unequal'}" for m, a in agree.items())]
    with open(args.markdown, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
