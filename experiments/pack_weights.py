# Last ran on commit 32cbc3e
"""Lowering A/B: weights pre-packed by the schedule (layout-free) against weights read in
OIHW order, or NCHW against NHWC convolutions.

The same conv tasks of a network are extracted once per arm (a
:class:`tuner.engine.tasks.Lowering`) and tuned side by side with the default preset, for the
same trials and seeds, in one run. ``plain``: OIHW weights; ``packed`` (the default):
MetaSchedule's ``RewriteLayout`` lets each schedule choose the weight layout it reads best,
and the compile packs the weights once (the timed kernel excludes the packing, as the
network does); ``nhwc``: packed, and the convolutions converted to NHWC (the transposes
this inserts at the network's edges are not in the conv tasks: see the network runs).

    python -m experiments.pack_weights                     # plain vs packed, resnet-18's convs
    python -m experiments.pack_weights --arms packed nhwc --out docs/lab/compile/layout
    python -m experiments.pack_weights --network alexnet --tasks fused_conv2d_add_relu1
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bench.common import REPO, geomean, median, provenance, tune_tasks, write_results

ARMS = {"plain": {"pack_weights": False}, "packed": {"pack_weights": True},
        "nhwc": {"pack_weights": True, "layout": "NHWC"}}
TITLES = {("plain", "packed"): "Packed (layout-free) weights against OIHW weights",
          ("packed", "nhwc"): "NHWC against NCHW convolutions (both packed)"}


def conv_tasks(network: str, arm: str, names: list[str] | None, limit: int) -> list:
    """The network's conv tasks (heaviest first), extracted with an arm's lowering."""
    from tuner.engine.networks import load_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    tasks = extract_tasks(load_network(network).relax_mod, resolve_target("llvm").target,
                          Lowering(**ARMS[arm]))
    convs = [t for t in tasks if t.is_conv and (not names or t.name in names)]
    return convs[:limit]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--network", default="resnet-18")
    p.add_argument("--tasks", nargs="+", help="task names (default: the heaviest convs)")
    p.add_argument("--limit", type=int, default=3, help="conv tasks when --tasks is not given")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--arms", nargs=2, default=["plain", "packed"], choices=list(ARMS),
                   help="baseline, then challenger (ratios are challenger / baseline)")
    p.add_argument("--out", default=os.path.join(REPO, "docs/lab/compile/pack_weights"))
    args = p.parse_args(argv)
    from tuner.engine.runtime import runtime_info
    from tuner.engine.targets import resolve_target

    base, other = args.arms
    arms = {arm: conv_tasks(args.network, arm, args.tasks, args.limit) for arm in args.arms}
    rows = []
    for seed in args.seeds:
        for i, _ in enumerate(arms[other]):
            for arm in (base, other):
                t = arms[arm][i]
                outcome, *_ = tune_tasks([t], ["preset=meta-BO-T", f"trials={args.trials}",
                                               "trials_per_round=16", f"seed={seed}"],
                                         prefix="bench-pack-")
                rows.append({"pair": i, "task": t.name, "arm": arm, "seed": seed,
                             "flops": t.flops,
                             "best_ms": outcome.best_ms[0],
                             "tuning_seconds": outcome.tuning_seconds})
                print(json.dumps(rows[-1]), flush=True)
    prov = provenance("experiments.pack_weights")
    info = resolve_target("llvm")
    lines = [f"# {TITLES.get((base, other), f'{other} against {base}')}", "",
             f"Command: `{prov['command']}`; {prov['machine']}; {prov['date']}; target "
             f"`{info.description}`; threads {runtime_info(info.num_cores)}.", "",
             f"Each conv task of {args.network} tuned {args.trials} trials (default preset, "
             "16 a round) per seed, both arms in this run.", "",
             f"| task | GFLOP | {base} ms (per seed) | {other} ms (per seed) | {other} / {base} "
             "(median) |", "|---|---|---|---|---|"]
    ratios = []
    for pair in sorted({r["pair"] for r in rows}):
        # The two extractions name a task differently; they pair by position (same FLOPs).
        plain = [r["best_ms"] for r in rows if r["pair"] == pair and r["arm"] == base]
        packed = [r["best_ms"] for r in rows if r["pair"] == pair and r["arm"] == other]
        per_seed = [b / a for a, b in zip(plain, packed, strict=False) if a and b]
        ratio = median(per_seed)
        ratios.append(ratio)
        first = next(r for r in rows if r["pair"] == pair)
        ms = lambda vals: " / ".join("-" if v is None else f"{v:.3f}" for v in vals)  # noqa: E731
        lines.append(f"| {first['task']} | {first['flops'] / 1e9:.3f} | {ms(plain)} | "
                     f"{ms(packed)} | {'-' if ratio is None else f'{ratio:.3f}'} |")
    gm = geomean(ratios)
    lines += ["", f"Geomean of the per-task medians, {other} / {base}: "
              + ("-" if gm is None else f"{gm:.3f}") + ".", ""]
    write_results(args.out + ".json", args.out + ".md",
                  {**prov, "target": info.description, "rows": rows}, "\n".join(lines),
                  rows_key="rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
