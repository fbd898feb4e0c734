"""Wall time per tuning trial: MetaTune's tuner set-up vs MetaSchedule's plain defaults.

Both tune the same task (resnet-18's 64->64 3x3 conv at 56x56 with its bias+ReLU
epilogue, batch norm folded) with XGB + evolutionary search, 16 trials a round, same
seeds and budgets, each run in a fresh process (so start-up costs are real), the two
variants alternating seed by seed on one machine:

- ``metaschedule``: ``ms.tune_tasks`` with ``builder="local"``, ``runner="local"`` and
  ``EvolutionarySearch()`` defaults, exactly as MetaSchedule ships.
- ``metatune``: what ``tune.py`` uses (its ``configs/tune.yaml`` search and runner
  settings): target-specific tensor intrinsics only, a persistent pre-initialized
  builder pool, a pre-initialized runner, its round-by-round scheduler and no-repeat
  search wrapper.

Usage:
    python bench/bench_trial_overhead.py --seeds 0 1 2 --trials 32 \
        --out docs/bench/trial_overhead.json --markdown docs/bench/trial_overhead.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TASK = "fused_conv2d1_add1_relu1"
VARIANTS = ("metaschedule", "metatune")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(variant: str, seed: int, trials: int, out: str) -> None:
    """Run one variant in this (fresh) process and write its measurements to ``out``."""
    t_process = time.perf_counter()
    sys.path.insert(0, REPO)
    from tuner.networks import load_network
    from tuner.targets import resolve_target
    from tuner.tasks import extract_tasks

    if variant == "metatune":
        from tuner.intrinsics import load_tensor_intrinsics

        load_tensor_intrinsics(("llvm",))
    import logging

    from tvm.s_tir import meta_schedule as ms

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    info = resolve_target("llvm")
    task = next(t for t in extract_tasks(load_network("resnet-18").relax_mod, info.target)
                if t.name == TASK)
    work_dir = tempfile.mkdtemp(prefix=f"bench-{variant}-")
    from tuner.monitor import FailureMonitor, MonitorCallback, ProgressMonitor

    names = [task.name]
    progress = ProgressMonitor(task_names=names, task_weights=[1], best_seconds=[None],
                               budget=trials, work_dir=work_dir, show_bar=False)
    failures = FailureMonitor(max_failed_rounds=10**6, task_names=names)
    callbacks = [*ms.measure_callback.MeasureCallback.create("default"),
                 MonitorCallback([failures, progress])]
    if variant == "metaschedule":
        strategy = ms.search_strategy.EvolutionarySearch()
        t_start = time.perf_counter()  # TuneContext imports all tensor intrinsics here
        ctx = ms.TuneContext(mod=task.extracted.dispatched[0], target=info.target,
                             space_generator="post-order-apply", search_strategy=strategy,
                             task_name=task.name, rand_state=seed, num_threads=info.num_cores)
        ms.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=work_dir,
                      max_trials_global=trials, num_trials_per_iter=16,
                      builder="local", runner="local", cost_model="xgb",
                      measure_callbacks=callbacks)
    else:
        from tuner.builder import PersistentBuilder
        from tuner.config import load_tune_config
        from tuner.tuning import make_contexts, make_cost_model, make_runner, make_search

        cfg = load_tune_config()
        t_start = time.perf_counter()
        builder = PersistentBuilder(max_workers=info.num_cores, target_kinds=("llvm",),
                                    timeout_sec=cfg["builder"]["timeout_sec"])
        builder.warm_up()
        runner = make_runner(cfg["runner"], ("llvm",))
        ctxs = make_contexts([task], info.target, make_search("evolutionary",
                             cfg["search_params"]), work_dir, seed, info.num_cores)
        from tuner.scheduler import EagerGradientScheduler

        database = ms.database.JSONDatabase(work_dir=work_dir)
        EagerGradientScheduler().tune(
            tasks=ctxs, task_weights=[1.0], max_trials_global=trials,
            max_trials_per_task=trials, num_trials_per_iter=16, builder=builder, runner=runner,
            measure_callbacks=callbacks, database=database,
            cost_model=make_cost_model("xgb", info.num_cores))
        builder.shutdown()
    t_end = time.perf_counter()
    result = {
        "variant": variant, "seed": seed, "trials": progress.done,
        "valid": progress.done - failures.failures,
        "best_ms": progress.best[0] * 1e3 if progress.best[0] else None,
        "startup_s": t_start - t_process,
        "tuning_s": t_end - t_start,
        "total_s": t_end - t_process,
        "errors": failures.errors.most_common(3),
    }
    result["tuning_s_per_trial"] = result["tuning_s"] / max(1, progress.done)
    result["total_s_per_trial"] = result["total_s"] / max(1, progress.done)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)


def summarize(runs: list[dict]) -> dict:
    """Medians per variant and per-seed ratios (metaschedule / metatune)."""
    by = {v: [r for r in runs if r["variant"] == v] for v in VARIANTS}
    summary = {}
    for v, rs in by.items():
        if rs:
            summary[v] = {k: statistics.median(r[k] for r in rs)
                          for k in ("tuning_s_per_trial", "total_s_per_trial", "valid", "startup_s")}
    seeds = sorted({r["seed"] for r in runs})
    ratios = []
    for s in seeds:
        a = next((r for r in by["metaschedule"] if r["seed"] == s), None)
        b = next((r for r in by["metatune"] if r["seed"] == s), None)
        if a and b:
            ratios.append({"seed": s,
                           "tuning_per_trial": a["tuning_s_per_trial"] / b["tuning_s_per_trial"],
                           "total_per_trial": a["total_s_per_trial"] / b["total_s_per_trial"]})
    summary["speedup_per_seed"] = ratios
    if ratios:
        summary["median_speedup_tuning_per_trial"] = statistics.median(
            r["tuning_per_trial"] for r in ratios)
        summary["median_speedup_total_per_trial"] = statistics.median(
            r["total_per_trial"] for r in ratios)
    return summary


def markdown(doc: dict) -> str:
    """The results as a markdown page."""
    lines = [
        "# Wall time per tuning trial: MetaTune set-up vs MetaSchedule defaults", "",
        f"- command: `{doc['command']}`", f"- date: {doc['date']}", f"- machine: {doc['machine']}",
        f"- task: resnet-18 `{TASK}` (231.6 MFLOP), XGB + evolutionary, 16 trials/round, "
        f"{doc['trials']} trials per run", "",
        "| variant | seed | trials | valid | best (ms) | start-up (s) | tuning s/trial | total s/trial |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["runs"]:
        best = f"{r['best_ms']:.3f}" if r["best_ms"] else "-"
        lines.append(f"| {r['variant']} | {r['seed']} | {r['trials']} | {r['valid']} | {best} | "
                     f"{r['startup_s']:.1f} | {r['tuning_s_per_trial']:.2f} | "
                     f"{r['total_s_per_trial']:.2f} |")
    s = doc["summary"]
    if "median_speedup_tuning_per_trial" in s:
        lines += ["", f"Median speed-up per trial over seeds (metaschedule / metatune): "
                  f"tuning loop {s['median_speedup_tuning_per_trial']:.1f}x, "
                  f"including process start-up {s['median_speedup_total_per_trial']:.1f}x."]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--out", default="docs/bench/trial_overhead.json")
    p.add_argument("--markdown", default="docs/bench/trial_overhead.md")
    p.add_argument("--worker", nargs=3, metavar=("VARIANT", "SEED", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.trials, args.worker[2])
        return
    sys.path.insert(0, REPO)
    from tuner.report import machine_info

    doc = {"command": "python " + " ".join(sys.argv), "trials": args.trials, "runs": []}
    if os.path.exists(args.out):  # resume: keep finished runs of the same set-up
        with open(args.out, encoding="utf-8") as f:
            old = json.load(f)
        if old.get("trials") == args.trials:
            doc["runs"] = old.get("runs", [])
    done = {(r["variant"], r["seed"]) for r in doc["runs"]}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    for seed in args.seeds:
        for variant in args.variants:
            if (variant, seed) in done:
                continue
            print(f"[bench] {variant} seed {seed} ...", flush=True)
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
                path = tmp.name
            subprocess.run([sys.executable, __file__, "--trials", str(args.trials),
                            "--worker", variant, str(seed), path], check=True)
            with open(path, encoding="utf-8") as f:
                run = json.load(f)
            print(f"[bench] {run}", flush=True)
            doc["runs"].append(run)
            info = machine_info()
            doc["machine"] = f"{info['cpu']}, {info['cores']} cores, TVM {info['tvm']}"
            doc["date"] = info["date"]
            doc["summary"] = summarize(doc["runs"])
            with open(args.out, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
            with open(args.markdown, "w", encoding="utf-8") as f:
                f.write(markdown(doc))


if __name__ == "__main__":
    main()
