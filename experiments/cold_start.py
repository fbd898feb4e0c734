# Last ran on commit 82b5d40
"""The first round of a task: how good is the batch MetaTune picks before any measurement?

At network scale most tasks get one or two rounds (resnet-18 at 256 trials: one 16-trial
round on each of 16 of its 19 tasks), so the batch chosen with no measurement of the task,
guided by the cost model alone, decides much of the result. This benchmark tunes one
round (``--trials`` trials) of each workload with each configuration and seed, and
reports the best latency of that round, each configuration against the first (the
baseline), and the round's search seconds.

The default workloads are the checkpoint's validation workloads (one per convolution
kind; never trained on, and not the framework comparison's held-out network tasks), so
that choices made here are not tuned on the benchmark's tasks. A workload named
``network/task`` (e.g. ``resnet-18/fused_conv2d1_add1_relu11``, as ``tune.py`` lists a
built-in network's tasks) is that network's task instead: for reports on held-out tasks,
such as one CPU's checkpoint tuning on another (``docs/lab/tuning/cross-cpu-tuning.md``).

With ``--trials-per-round`` below ``--trials`` each run tunes several rounds, and the page
compares configurations after the whole budget: the same A/B of tune settings over full
runs (e.g. the RL search's settings, ``docs/lab/search/rl_settings.md``), still on workloads no
report is made on.

Runs are recorded one JSON each under ``--runs-dir`` as they finish: rerun to resume.

Usage:
    python -m experiments.cold_start                                  # about 20 minutes
    python -m experiments.cold_start --configs "base=" \\
        "cold=search_params.bo.cold_population=512 search_params.bo.cold_genetic_iters=3"
    python -m experiments.cold_start --workloads resnet-18/fused_conv2d1_add1_relu11 \\
        --layout NHWC \\
        --trials 128 --trials-per-round 16 --report-at 64   # a network task as tune.py tunes it
"""

from __future__ import annotations

import argparse
import os

from bench.common import measured_span, provenance, recorded_run, show_slow_steps, write_results
from experiments.cold_start_page import markdown, sources_said, workloads_said
from experiments.cold_start_summary import batch_pairwise, best_at, summarize
from experiments.cold_start_tasks import (
    default_workloads,
    is_network_task,
    network_tasks,
    run_one,
    workload_task,
)

__all__ = [  # the names defined here before the split into siblings
    "DEFAULT_CONFIGS", "batch_pairwise", "best_at", "default_workloads",
    "is_network_task", "main", "markdown", "network_tasks", "run_one", "sources_said",
    "summarize", "workload_task", "workloads_said"]

DEFAULT_CONFIGS = [
    "meta-BO-T=preset=meta-BO-T",
    "meta-BO-T cold 256x2=preset=meta-BO-T search_params.bo.cold_population=256 "
    "search_params.bo.cold_genetic_iters=2",
    "meta-BO-T cold 512x3=preset=meta-BO-T search_params.bo.cold_population=512 "
    "search_params.bo.cold_genetic_iters=3",
    "xgb-Xfer=preset=xgb-Xfer",
]


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+",
                   help="training-generator workload names (default: the checkpoint's "
                        "validation convolutions)")
    p.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS,
                   help="NAME=OVERRIDES (space-separated tune config overrides); the first "
                        "is the baseline")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--trials", type=int, default=16, help="trials of a run")
    p.add_argument("--trials-per-round", type=int,
                   help="trials per round (default --trials: one round)")
    p.add_argument("--layout", choices=("NCHW", "NHWC"), default="NCHW",
                   help="layout built-in networks' tasks are extracted in: NCHW, as the "
                        "datasets' held-out splits (default), or NHWC, tune.py's default")
    p.add_argument("--report-at", type=int, nargs="*", default=[],
                   help="also compare the runs' best after these many trials (from their "
                        "curves), e.g. 64 of a 128-trial run")
    p.add_argument("--checkpoint-json", default="checkpoints/llvm-icelake-server-super.json")
    p.add_argument("--runs-dir", default="docs/lab/search/runs/cold_start")
    p.add_argument("--out", default="docs/lab/search/cold_start")
    return p.parse_args()


def main() -> None:
    args = _parse()
    show_slow_steps()
    configs = dict(c.split("=", 1) for c in args.configs)
    workloads = args.workloads or default_workloads(args.checkpoint_json)
    os.makedirs(args.runs_dir, exist_ok=True)
    runs = []
    plan = [(s, w, c) for s in args.seeds for w in workloads for c in configs]
    for i, (seed, wl, config) in enumerate(plan, 1):
        slug = config.replace(" ", "_")
        per_round = args.trials_per_round or args.trials
        budget = (f"t{args.trials}" + (f"-b{per_round}" if per_round != args.trials else "")
                  + ("-nhwc" if args.layout == "NHWC" and is_network_task(wl) else ""))
        path = os.path.join(args.runs_dir,
                            f"{wl.replace('/', '--')}-{slug}-{budget}-{seed}.json")
        runs.append(recorded_run(
            path, f"[{i}/{len(plan)}] {wl} {config} seed {seed}",
            lambda: {**run_one(wl, configs[config].split(), seed, args.trials, per_round,  # noqa: B023 (called at once)
                               args.layout), "config": config}))  # noqa: B023 (called at once)
    doc = {**provenance("experiments.cold_start"), "trials": args.trials, "layout": args.layout,
           "trials_per_round": args.trials_per_round or args.trials, "seeds": args.seeds,
           "configs": configs, "runs_done": len(runs),
           "measured": measured_span(runs),
           "report_at": args.report_at,
           "summary": summarize(runs, list(configs), tuple(args.report_at), args.trials),
           "runs": runs}
    write_results(args.out + ".json", args.out + ".md", doc, markdown(doc))


if __name__ == "__main__":
    main()
