# Last ran on commit 14fbe6e
"""Search + model-update time per round against measurement time, at batch 32.

Tunes resnet-18's 64->64 3x3 conv (``fused_conv2d1_add1_relu11``, batch norm folded) with
``tune.py``'s own tuning loop (:func:`tuner.app.tuning.tune`) for each preset and seed, each
run in a fresh process, presets alternating seed by seed, and reads the per-round timings
the tuner logs (``rounds.jsonl``: search = proposing the batch, update = committing and
fine-tuning the cost model, measure = building and running the batch).

Usage:
    python -m experiments.bo_overhead --presets meta-BO-T meta-BO xgb --seeds 0 1 2 \
        --trials 128 --out docs/lab/search/bo_overhead.json \
        --markdown docs/lab/search/bo_overhead.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench.common import REPO, median, provenance, write_results

TASK = "fused_conv2d1_add1_relu11"


def worker(preset: str, seed: int, trials: int, batch: int, out: str,
           overrides: list[str]) -> None:
    """Tune the benchmark task with one preset in this process; write the run to ``out``."""
    from bench.common import tune_one_task

    run = tune_one_task("resnet-18", TASK, preset, seed, trials, batch, overrides)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(run, f)


def summarize(runs: list[dict]) -> dict:
    """Per preset: medians over all rounds after the first of each run, and per-seed bests."""
    out = {}
    for preset in dict.fromkeys(r["preset"] for r in runs):
        mine = [r for r in runs if r["preset"] == preset]
        rounds = [x for r in mine for x in r["rounds"][1:]]  # round 1 has no model to fit
        ratio = [(x["search_s"] + x["update_s"]) / x["measure_s"] for x in rounds
                 if x["measure_s"]]
        out[preset] = {
            "runs": len(mine), "rounds": len(rounds),
            "median_search_s": median([x["search_s"] for x in rounds]),
            "median_update_s": median([x["update_s"] for x in rounds]),
            "median_measure_s": median([x["measure_s"] for x in rounds if x["measure_s"]]),
            "median_overhead_ratio": median(ratio),
            "max_overhead_ratio": max(ratio) if ratio else None,
            "best_ms_per_seed": {r["seed"]: r["best_ms"] for r in mine},
            "median_best_ms": median([r["best_ms"] for r in mine if r["best_ms"]]),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", default=["meta-BO-T", "meta-BO", "xgb"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--trials", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--out", default="docs/lab/search/bo_overhead.json")
    p.add_argument("--markdown", default="docs/lab/search/bo_overhead.md")
    p.add_argument("--worker", nargs=3, metavar=("PRESET", "SEED", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="tune config overrides for every run")
    args = p.parse_args()
    if args.worker:
        preset, seed, out = args.worker
        worker(preset, int(seed), args.trials, args.batch, out, args.overrides)
        return
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for preset in args.presets:
                out = os.path.join(tmp, f"{preset}-{seed}.json")
                cmd = [sys.executable, "-m", "experiments.bo_overhead",
                       "--trials", str(args.trials), "--batch", str(args.batch),
                       "--worker", preset, str(seed), out, *args.overrides]
                subprocess.run(cmd, check=True, cwd=REPO)
                with open(out, encoding="utf-8") as f:
                    runs.append(json.load(f))
                print(f"{preset} seed {seed}: best {runs[-1]['best_ms']:.3f} ms", flush=True)
    doc = {**provenance("experiments.bo_overhead"),
           "task": TASK, "trials": args.trials, "batch": args.batch,
           "summary": summarize(runs), "runs": runs}
    lines = ["# Search and model update per round vs measurement (batch "
             f"{args.batch})", "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']}",
             f"- task: resnet-18 `{TASK}`, {args.trials} trials per run, seeds {args.seeds}; "
             "each run a fresh process; rounds after the first (medians over all of them)",
             "- overhead = (search + update) / measure, per round; target: at most 0.20", "",
             "| preset | search s | update s | measure s | overhead (median) | overhead (max) "
             "| best ms (median over seeds) |", "|---|---|---|---|---|---|---|"]
    for preset, s in doc["summary"].items():
        lines.append(
            f"| {preset} | {s['median_search_s']:.2f} | {s['median_update_s']:.2f} | "
            f"{s['median_measure_s']:.2f} | {s['median_overhead_ratio']:.3f} | "
            f"{s['max_overhead_ratio']:.3f} | {s['median_best_ms']:.3f} |")
    write_results(args.out, args.markdown, doc, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
