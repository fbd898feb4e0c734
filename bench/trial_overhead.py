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

A variant ``metatune:N`` runs ``metatune`` with an evolutionary population of ``N``.

Usage:
    python -m bench.trial_overhead --seeds 0 1 2 --trials 32 \
        --out docs/bench/trial_overhead.json --markdown docs/bench/trial_overhead.md
    python -m bench.trial_overhead --variants metatune:256 metatune:512 \
        --seeds 0 1 2 3 4 --trials 64 --out docs/lab/search/search_population.json \
        --markdown docs/lab/search/search_population.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.common import REPO, in_repo

TASK = "fused_conv2d1_add1_relu11"
VARIANTS = ("metaschedule", "metatune")
BASELINE = "metaschedule"
OUT = "docs/bench/trial_overhead"  #: the page's default prefix, relative to the repository


def worker(variant: str, seed: int, trials: int, out: str) -> None:
    """Run one variant in this (fresh) process and write its measurements to ``out``."""
    t_process = time.perf_counter()
    from tuner.engine.networks import load_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    name, _, population = variant.partition(":")
    if name == "metatune":
        from tuner.engine.intrinsics import load_tensor_intrinsics

        load_tensor_intrinsics(("llvm",))
    import logging

    from tvm.s_tir import meta_schedule as ms

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    info = resolve_target("llvm")
    task = next(t for t in extract_tasks(load_network("resnet-18").relax_mod, info.target)
                if t.name == TASK)
    work_dir = tempfile.mkdtemp(prefix=f"bench-{name}-")
    from tuner.app.monitor import FailureMonitor, MonitorCallback, ProgressMonitor

    names = [task.name]
    progress = ProgressMonitor(task_names=names, task_weights=[1], best_seconds=[None],
                               budget=trials, work_dir=work_dir, show_bar=False)
    failures = FailureMonitor(max_failed_rounds=10**6, task_names=names)
    callbacks = [*ms.measure_callback.MeasureCallback.create("default"),
                 MonitorCallback([failures, progress])]
    if name == BASELINE:
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
        from tuner.app.config import load_tune_config
        from tuner.app.session import build_session
        from tuner.engine.scheduler import EagerGradientScheduler

        # MetaTune's set-up (persistent builder, target-only intrinsics, no-repeat search)
        # with MetaSchedule's own cost model and search, so that only the set-up differs.
        cfg = load_tune_config(overrides=[
            "cost_model=xgb", "search=evolutionary", f"seed={seed}",
            *([f"search_params.population_size={population}"] if population else [])])
        t_start = time.perf_counter()
        session = build_session(cfg, info)
        ctxs = session.contexts([task], work_dir)
        database = ms.database.JSONDatabase(work_dir=work_dir)
        EagerGradientScheduler().tune(
            tasks=ctxs, task_weights=[1.0], max_trials_global=trials,
            max_trials_per_task=trials, num_trials_per_iter=16, builder=session.builder,
            runner=session.runner, measure_callbacks=callbacks, database=database,
            cost_model=session.cost_model)
        session.close()
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
    shutil.rmtree(work_dir, ignore_errors=True)  # after the clock stopped: not timed


def summarize(runs: list[dict]) -> dict:
    """Medians per variant, and per-seed speed-ups of every variant over the baseline."""
    labels = sorted({r["variant"] for r in runs})
    summary: dict = {"per_variant": {}, "speedup_vs_baseline": {}}
    for label in labels:
        rs = [r for r in runs if r["variant"] == label]
        summary["per_variant"][label] = {
            k: statistics.median(r[k] for r in rs if r[k] is not None)
            for k in ("tuning_s_per_trial", "total_s_per_trial", "valid", "startup_s", "best_ms")
            if any(r[k] is not None for r in rs)}
        summary["per_variant"][label]["seeds"] = sorted(r["seed"] for r in rs)
    base = {r["seed"]: r for r in runs if r["variant"] == BASELINE}
    for label in labels:
        if label == BASELINE:
            continue
        ratios = [{"seed": r["seed"],
                   "tuning_per_trial": (base[r["seed"]]["tuning_s_per_trial"]
                                        / r["tuning_s_per_trial"]),
                   "total_per_trial": base[r["seed"]]["total_s_per_trial"] / r["total_s_per_trial"]}
                  for r in runs if r["variant"] == label and r["seed"] in base]
        if ratios:
            summary["speedup_vs_baseline"][label] = {
                "per_seed": ratios,
                "median_tuning_per_trial": statistics.median(x["tuning_per_trial"] for x in ratios),
                "median_total_per_trial": statistics.median(x["total_per_trial"] for x in ratios),
            }
    return summary


def markdown(doc: dict) -> str:
    """The results as a markdown page."""
    lines = [
        "# Wall time per tuning trial: MetaTune set-up vs MetaSchedule defaults", "",
        f"- command: `{doc['command']}`", f"- date: {doc['date']}", f"- machine: {doc['machine']}",
        f"- task: resnet-18 `{TASK}` (231.6 MFLOP), XGB + evolutionary, 16 trials/round, "
        f"{doc['trials']} trials per run",
        "- what it measures: wall time per trial (tuning loop; and with the process start-up). "
        "The best latency after so few trials varies by about 30% from run to run for the same "
        "set-up; it is listed to show no variant measures nothing, not to rank them.", "",
        "| variant | seed | trials | valid | best (ms) | start-up (s) | tuning s/trial "
        "| total s/trial |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["runs"]:
        best = f"{r['best_ms']:.3f}" if r["best_ms"] else "-"
        lines.append(f"| {r['variant']} | {r['seed']} | {r['trials']} | {r['valid']} | {best} | "
                     f"{r['startup_s']:.1f} | {r['tuning_s_per_trial']:.2f} | "
                     f"{r['total_s_per_trial']:.2f} |")
    s = doc["summary"]
    lines += ["", "| variant | seeds | median tuning s/trial | median total s/trial "
              "| median best (ms) |",
              "|---|---|---|---|---|"]
    for label, m in s["per_variant"].items():
        best = f"{m['best_ms']:.3f}" if "best_ms" in m else "-"
        lines.append(f"| {label} | {len(m['seeds'])} | {m['tuning_s_per_trial']:.2f} | "
                     f"{m['total_s_per_trial']:.2f} | {best} |")
    for label, sp in s["speedup_vs_baseline"].items():
        lines += ["", f"{label}: median speed-up per trial over {BASELINE}, same seeds "
                  f"({len(sp['per_seed'])}): tuning loop {sp['median_tuning_per_trial']:.1f}x, "
                  f"including process start-up {sp['median_total_per_trial']:.1f}x."]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS),
                   help="metaschedule, metatune, or metatune:POPULATION")
    p.add_argument("--out", default=OUT + ".json")
    p.add_argument("--markdown", default=OUT + ".md")
    p.add_argument("--worker", nargs=3, metavar=("VARIANT", "SEED", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.trials, args.worker[2])
        return
    from metatune.provenance import machine_info

    out, page = in_repo(args.out), in_repo(args.markdown)
    doc = {"command": "python -m bench.trial_overhead " + " ".join(sys.argv[1:]),
           "trials": args.trials, "runs": []}
    if os.path.exists(out):  # resume: keep finished runs of the same set-up
        with open(out, encoding="utf-8") as f:
            old = json.load(f)
        if old.get("trials") == args.trials:
            doc["runs"] = old.get("runs", [])
    done = {(r["variant"], r["seed"]) for r in doc["runs"]}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    for seed in args.seeds:
        for variant in args.variants:
            if (variant, seed) in done:
                continue
            print(f"[bench] {variant} seed {seed} ...", flush=True)
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
                path = tmp.name
            subprocess.run([sys.executable, "-m", "bench.trial_overhead",
                            "--trials", str(args.trials), "--worker", variant, str(seed), path],
                           check=True, cwd=REPO)
            with open(path, encoding="utf-8") as f:
                run = json.load(f)
            print(f"[bench] {run}", flush=True)
            doc["runs"].append(run)
            info = machine_info()
            doc["machine"] = f"{info['cpu']}, {info['cores']} cores, TVM {info['tvm']}"
            doc["date"] = info["date"]
            doc["summary"] = summarize(doc["runs"])
            with open(out, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
            with open(page, "w", encoding="utf-8") as f:
                f.write(markdown(doc))


if __name__ == "__main__":
    main()
