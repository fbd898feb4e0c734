# Last ran on commit 83ee7ee (on a device machine: experiments/gpu_check.sh)
"""Tune one convolution with the cost model and BO's GP on the GPU and on the CPU, side by
side, and report the search and model-update seconds per round of each (issue 15).

The TVM target stays llvm (the PyPI TVM is built for llvm only): candidates are built and
measured on the CPU either way; ``device`` moves the GCN (scoring, online fine-tuning) and
the GP. Each seed tunes resnet-18's ``fused_conv2d1_add1_relu11`` (64->64 3x3 conv at
56x56) once per device, devices alternating seed by seed, all in this one process (the
first run pays CUDA's start-up; round 1 of each run, which has no model to fit, is left
out of the medians). Without a GPU it says so and exits 2.

Usage:
    python -m experiments.gpu_check --seeds 0 1 --trials 64 --batch 16 \
        --out docs/lab/gpu/gpu_check.json --markdown docs/lab/gpu/gpu_check.md
    python -m experiments.gpu_check --devices cpu --seeds 0 --trials 32   # the CPU half only
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TASK = "fused_conv2d1_add1_relu11"


def summarize(runs: list[dict]) -> dict:
    """Per device: medians over the rounds after the first of each run, and the bests."""
    from bench.common import geomean, median

    out = {}
    for device in dict.fromkeys(r["device"] for r in runs):
        mine = [r for r in runs if r["device"] == device]
        rounds = [x for r in mine for x in r["rounds"][1:]]
        out[device] = {
            "runs": len(mine), "rounds": len(rounds),
            "median_search_s": median([x["search_s"] for x in rounds]),
            "median_update_s": median([x["update_s"] for x in rounds]),
            "median_measure_s": median([x["measure_s"] for x in rounds if x["measure_s"]]),
            "first_round_search_s": [r["rounds"][0]["search_s"] for r in mine if r["rounds"]],
            "tuning_seconds": [round(r["tuning_seconds"], 1) for r in mine],
            "best_ms": [r["best_ms"] for r in mine],
            "geomean_best_ms": geomean([r["best_ms"] for r in mine]),
        }
    return out


def page(doc: dict) -> str:
    """The markdown report."""
    prov, s = doc["provenance"], doc["summary"]
    lines = [
        "# The cost model and the GP on a GPU against the CPU (issue 15)", "",
        f"- Command: `{prov['command']}`", f"- Date: {prov['date']}",
        f"- Machine: {prov['machine']}", f"- GPU: {doc['gpu']}; PyTorch {doc['torch']}",
        f"- Task: resnet-18 `{TASK}`, preset `{doc['preset']}`, {doc['trials']} trials in "
        f"rounds of {doc['batch']}, seeds {doc['seeds']}; checkpoint "
        f"`{doc['runs'][0].get('checkpoint', '?')}`",
        "- search = proposing a round's batch (encoding candidates, GCN scores, GP fit and "
        "acquisition); update = committing the measured batch and fine-tuning the GCN; "
        "measure = building and running it on the CPU (the same work for both devices). "
        "Medians over the rounds after the first of each run.", "",
        "| device | runs | rounds | search s/round | update s/round | measure s/round "
        "| tuning s per run | best ms per run |",
        "|---|---|---|---|---|---|---|---|"]

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    for device, x in s.items():
        lines.append(
            f"| {device} | {x['runs']} | {x['rounds']} | {num(x['median_search_s'])} | "
            f"{num(x['median_update_s'])} | {num(x['median_measure_s'])} | "
            f"{', '.join(f'{t:.0f}' for t in x['tuning_seconds'])} | "
            f"{', '.join(f'{b:.4f}' for b in x['best_ms'])} |")
    if {"cuda", "cpu"} <= s.keys() and all(s[d]["rounds"] for d in ("cuda", "cpu")):
        c, g = s["cpu"], s["cuda"]
        lines += ["", f"GPU / CPU: search {g['median_search_s'] / c['median_search_s']:.2f}x, "
                      f"update {g['median_update_s'] / c['median_update_s']:.2f}x (below 1: "
                      "the GPU is faster). The best latencies are not comparable across devices: "
                      "float results differ between them, so the searches diverge."]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", nargs="+", default=["cuda", "cpu"], choices=["cuda", "cpu"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--preset", default="meta-BO-T")
    p.add_argument("--out", default="docs/lab/gpu/gpu_check.json")
    p.add_argument("--markdown", default="docs/lab/gpu/gpu_check.md")
    args = p.parse_args()
    import torch

    from bench.common import provenance, tune_one_task, write_results
    from metatune.device import describe, resolve_device

    if "cuda" in args.devices and not torch.cuda.is_available():
        print("no GPU visible to torch here: run this on a CUDA or ROCm machine, or pass "
              "--devices cpu", file=sys.stderr)
        return 2
    gpu = describe(resolve_device("cuda")) if torch.cuda.is_available() else "none"
    prov = provenance("gpu_check.py")
    prov["command"] = "python -m experiments.gpu_check " + shlex.join(sys.argv[1:])
    print(f"GPU: {gpu}; torch {torch.__version__}; {prov['machine']}", flush=True)
    runs = []
    for seed in args.seeds:
        for device in args.devices:
            run = tune_one_task("resnet-18", TASK, args.preset, seed, args.trials, args.batch,
                                [f"device={device}"])
            run["device"] = device
            runs.append(run)
            print(f"{device} seed {seed}: best {run['best_ms']:.4f} ms, "
                  f"{run['tuning_seconds']:.0f} s, search s/round "
                  f"{[round(x['search_s'], 3) for x in run['rounds']]}, update s/round "
                  f"{[round(x['update_s'], 3) for x in run['rounds']]}", flush=True)
    doc = {"provenance": prov, "gpu": gpu, "torch": torch.__version__, "preset": args.preset,
           "trials": args.trials, "batch": args.batch, "seeds": args.seeds,
           "summary": summarize(runs), "runs": runs}
    write_results(args.out, args.markdown, doc, page(doc), rows_key="runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
