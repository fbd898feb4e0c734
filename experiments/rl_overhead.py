# Last ran on commit 02a4e6f
"""The RL search's overhead per round (search + model update) against measurement.

Tunes resnet-18 conv tasks with ``tune.py``'s own tuning loop (:func:`tuner.app.tuning.tune`)
for each preset, batch size (``trials_per_round``) and seed, each run in a fresh process,
and reads the per-round timings the tuner logs (``rounds.jsonl``: search = starts,
rollouts, PPO update and clustering; update = committing and updating the cost model;
measure = building and running the batch). The RL search measures one candidate per
cluster, often fewer than the batch, so the page also gives the candidates measured per
round and the overhead per measured trial. Each run is recorded under ``--runs-dir``:
rerun to resume.

    python -m experiments.rl_overhead                      # RL and meta-RL-T, 2 convs, batch 16
                                                     # and 32, 3 seeds x 128 trials
    python -m experiments.rl_overhead --presets meta-RL-T meta-BO-T --seeds 0
    # with xgb in the same run, each preset's tuning time and best also as ratios to xgb's
    python -m experiments.rl_overhead --presets RL meta-RL-T xgb --seeds 0 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bench.common import REPO, median, provenance, write_results

#: Two of resnet-18's convs (the framework comparison's held-out pair), as task extraction
#: names them today (``fused_conv2d1_add1_relu1`` then, with a trailing 1 now).
TASKS = ["resnet-18/fused_conv2d1_add1_relu11", "resnet-18/fused_conv2d6_add5_relu31"]


def worker(preset: str, task: str, seed: int, trials: int, batch: int, out: str,
           overrides: list[str]) -> None:
    """Tune one task with one preset in this process; write the run, with the target and
    the thread counts it ran with, to ``out``."""
    from bench.common import tune_one_task
    from tuner.engine.runtime import runtime_info
    from tuner.engine.targets import resolve_target

    network, name = task.split("/", 1)
    run = tune_one_task(network, name, preset, seed, trials, batch, overrides)
    info = resolve_target("llvm")
    run.update(batch=batch, target=info.description, runtime=runtime_info(info.num_cores))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(run, f)


def summarize(runs: list[dict]) -> list[dict]:
    """Per preset and batch: medians over the rounds after each run's first (round 1 has
    no model to update), the share of the batch measured, and the best per seed."""
    rows = []
    for key in dict.fromkeys((r["preset"], r["batch"]) for r in runs):
        mine = [r for r in runs if (r["preset"], r["batch"]) == key]
        rounds = [x for r in mine for x in r["rounds"][1:] if x["measure_s"]]
        overhead = [x["search_s"] + x["update_s"] for x in rounds]
        rows.append({
            "preset": key[0], "batch": key[1], "runs": len(mine), "rounds": len(rounds),
            "median_trials_per_round": median([x["batch"] for x in rounds]),
            "median_search_s": median([x["search_s"] for x in rounds]),
            "median_update_s": median([x["update_s"] for x in rounds]),
            "median_measure_s": median([x["measure_s"] for x in rounds]),
            "median_overhead_ratio": median([o / x["measure_s"]
                                             for o, x in zip(overhead, rounds, strict=False)]),
            "max_overhead_ratio": max((o / x["measure_s"]
                                       for o, x in zip(overhead, rounds, strict=False)),
                                      default=None),
            "median_overhead_per_trial_s": median([o / x["batch"]
                                                   for o, x in zip(overhead, rounds, strict=False)
                                                   if x["batch"]]),
            "best_ms": {f"{r['task']} s{r['seed']}": r["best_ms"] for r in mine},
        })
    return rows


def write_page(runs: list[dict], out: str, args: argparse.Namespace) -> None:
    prov = provenance("experiments.rl_overhead")
    doc = {**prov, "tasks": args.tasks, "trials": args.trials, "seeds": args.seeds,
           "summary": summarize(runs), "runs": runs}
    fmt = lambda v, p=2: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
    lines = ["# RL search: search and model update per round vs measurement", "",
             f"- command: `{prov['command']}`", f"- date: {prov['date']}",
             f"- machine: {prov['machine']}",
             *sorted({f"- target `{r['target']}`, TVM {r['runtime']['tvm_threads']} / PyTorch "
                      f"{r['runtime']['torch_threads']} threads" for r in runs}),
             f"- tasks: {', '.join(args.tasks)}; {args.trials} trials per run, seeds "
             f"{args.seeds}; each run a fresh process; rounds after the first of each run "
             "(medians over all of them)",
             "- overhead = (search + update) / measure, per round; per trial: (search + "
             "update) / candidates measured that round", "",
             "| preset | batch | runs | rounds | measured / round | search s | update s | "
             "measure s | overhead (median) | overhead (max) | overhead s / trial |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in doc["summary"]:
        lines.append(
            f"| {s['preset']} | {s['batch']} | {s['runs']} | {s['rounds']} | "
            f"{fmt(s['median_trials_per_round'], 1)} | {fmt(s['median_search_s'])} | "
            f"{fmt(s['median_update_s'])} | {fmt(s['median_measure_s'])} | "
            f"{fmt(s['median_overhead_ratio'], 3)} | {fmt(s['max_overhead_ratio'], 3)} | "
            f"{fmt(s['median_overhead_per_trial_s'], 3)} |")
    lines += ["", "| preset | batch | task | seed | best ms | trials | tuning s |",
              "|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['preset']} | {r['batch']} | {r['task']} | {r['seed']} | "
                     f"{fmt(r['best_ms'], 3)} | {r['trials']} | {fmt(r['tuning_seconds'], 1)} |")
    baseline = against_baseline(runs)
    doc["against_xgb"] = baseline
    if baseline:
        lines += ["", "Against `xgb` in the same seed, batch and task (each preset's run "
                  "divided by xgb's; median over seeds, min-max in brackets):", "",
                  "| preset | batch | tuning time / xgb | best ms / xgb | seeds |",
                  "|---|---|---|---|---|"]
        for b in baseline:
            lines.append(f"| {b['preset']} | {b['batch']} | "
                         f"{b['time_ratio']['median']:.2f} ({b['time_ratio']['min']:.2f}-"
                         f"{b['time_ratio']['max']:.2f}) | {b['best_ratio']['median']:.3f} "
                         f"({b['best_ratio']['min']:.3f}-{b['best_ratio']['max']:.3f}) | "
                         f"{b['pairs']} |")
    lines.append("")
    write_results(out + ".json", out + ".md", doc, "\n".join(lines), rows_key="runs")


def against_baseline(runs: list[dict], baseline: str = "xgb") -> list[dict]:
    """Each preset's tuning time and best latency over ``baseline``'s in the same seed,
    batch and task: ``[{preset, batch, pairs, time_ratio, best_ratio}]`` with the median,
    min and max of each ratio (empty without ``baseline`` runs)."""
    base = {(r["task"], r["batch"], r["seed"]): r for r in runs if r["preset"] == baseline}
    out = []
    for preset, batch in dict.fromkeys((r["preset"], r["batch"]) for r in runs):
        if preset == baseline:
            continue
        pairs = [(r, base[(r["task"], r["batch"], r["seed"])]) for r in runs
                 if (r["preset"], r["batch"]) == (preset, batch)
                 and (r["task"], r["batch"], r["seed"]) in base]
        pairs = [(r, b) for r, b in pairs if r["best_ms"] and b["best_ms"]]
        if not pairs:
            continue
        time_ratio = [r["tuning_seconds"] / b["tuning_seconds"] for r, b in pairs]
        best_ratio = [r["best_ms"] / b["best_ms"] for r, b in pairs]
        out.append({"preset": preset, "batch": batch, "pairs": len(pairs),
                    **{name: {"median": median(v), "min": min(v), "max": max(v)}
                       for name, v in (("time_ratio", time_ratio),
                                       ("best_ratio", best_ratio))}})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", default=["RL", "meta-RL-T"])
    p.add_argument("--tasks", nargs="+", default=TASKS, help="network/task names")
    p.add_argument("--batches", nargs="+", type=int, default=[16, 32])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--trials", type=int, default=128)
    p.add_argument("--runs-dir", default=os.path.join(REPO, "docs/lab/search/runs/rl_overhead"))
    p.add_argument("--out", default=os.path.join(REPO, "docs/lab/search/rl_overhead"))
    p.add_argument("--worker", nargs=5, metavar=("PRESET", "TASK", "SEED", "BATCH", "OUT"),
                   help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="tune config overrides for every run")
    args = p.parse_args(argv)
    if args.worker:
        preset, task, seed, batch, out = args.worker
        worker(preset, task, int(seed), args.trials, int(batch), out, args.overrides)
        return 0
    os.makedirs(args.runs_dir, exist_ok=True)
    runs = []
    for seed in args.seeds:
        for batch in args.batches:
            for task in args.tasks:
                for preset in args.presets:  # presets alternate within a seed
                    name = f"{preset}-{task.replace('/', '-')}-b{batch}-s{seed}.json"
                    path = os.path.join(args.runs_dir, name)
                    if not os.path.exists(path):
                        subprocess.run([sys.executable, "-m", "experiments.rl_overhead",
                                        "--trials", str(args.trials), "--worker", preset, task,
                                        str(seed), str(batch), path, *args.overrides],
                                       check=True, cwd=REPO)
                    with open(path, encoding="utf-8") as f:
                        runs.append(json.load(f))
                    print(f"{preset} {task} batch {batch} seed {seed}: best "
                          f"{runs[-1]['best_ms']} ms", flush=True)
    write_page(runs, args.out, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
