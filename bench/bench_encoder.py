"""Encoder throughput: candidates per second for a resnet-18 convolution, one core.

Draws random, postprocessed candidates of resnet-18's ``fused_conv2d1_add1_relu11``
(64->64 3x3 conv at 56x56) from MetaSchedule's design space, then times
``metatune.graph.encode`` on them in both graph modes, in this one process.

Usage:
    python bench/bench_encoder.py --candidates 256 --out docs/bench/encoder.json \
        --markdown docs/bench/encoder.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = "fused_conv2d1_add1_relu11"


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--candidates", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="docs/bench/encoder.json")
    p.add_argument("--markdown", default="docs/bench/encoder.md")
    args = p.parse_args()
    sys.path.insert(0, REPO)
    import torch

    from metatune.graph import encode
    from metatune.provenance import machine_info

    torch.set_num_threads(1)
    funcs = candidates(args.candidates, args.seed)
    rates: dict[str, list[float]] = {}
    for mode in ("plain", "super"):
        encode(funcs[0], mode)  # warm-up (imports)
        for _ in range(args.repeats):
            start = time.perf_counter()
            for f in funcs:
                encode(f, mode)
            rates.setdefault(mode, []).append(len(funcs) / (time.perf_counter() - start))
    info = machine_info()
    doc = {
        "command": "python " + " ".join(sys.argv), "date": info["date"],
        "machine": f"{info['cpu']}, {info['cores']} cores, TVM {info['tvm']}",
        "task": TASK, "candidates": len(funcs),
        "candidates_per_second": {m: statistics.median(r) for m, r in rates.items()},
        "runs": rates,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    lines = ["# Graph encoder throughput", "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']} (one thread)",
             f"- {len(funcs)} random postprocessed candidates of resnet-18 `{TASK}`", "",
             "| mode | candidates/s (median of repeats) |", "|---|---|"]
    lines += [f"| {m} | {v:.0f} |" for m, v in doc["candidates_per_second"].items()]
    with open(args.markdown, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
