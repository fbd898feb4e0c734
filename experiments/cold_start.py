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
import functools
import json
import os

from bench.common import (REPO, geomean, measured_span, median, provenance, recorded_run,
                    show_slow_steps, tune_tasks, write_results)

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


def default_workloads(checkpoint_json: str) -> list[str]:
    """The checkpoint's validation workloads that are convolutions (dense left out)."""
    with open(checkpoint_json, encoding="utf-8") as f:
        names = json.load(f)["data"]["val_workloads"]
    return [n for n in names if n.startswith(("conv", "winograd", "depthwise"))]


def is_network_task(name: str) -> bool:
    """Whether a workload name is a built-in network's task (``network/task``)."""
    return "/" in name


@functools.lru_cache(maxsize=None)
def network_tasks(network: str, layout: str = "NCHW") -> dict:
    """A built-in network's tasks by name, extracted for this machine's target once, in
    ``layout`` (NCHW: as the datasets' held-out splits; NHWC: ``tune.py``'s default)."""
    from tuner.engine.networks import load_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    info = resolve_target("llvm")
    return {t.name: t for t in extract_tasks(load_network(network).relax_mod, info.target,
                                             Lowering(layout=layout))}


def workload_task(name: str, layout: str = "NCHW"):
    """A :class:`tuner.engine.tasks.TaskInfo` for a workload of the dataset's generator
    (``configs/collect.yaml``'s ``per_kind`` and ``seed``), or for a built-in network's
    task when ``name`` is ``network/task`` (extracted in ``layout``)."""
    if is_network_task(name):
        network, task = name.split("/", 1)
        tasks = network_tasks(network, layout)
        if task not in tasks:
            raise SystemExit(f"{network} has no task {task!r}; its tasks: {', '.join(tasks)}")
        return tasks[task]
    import tvm
    from omegaconf import OmegaConf
    from tvm.s_tir import meta_schedule as ms

    from metatune.workloads import training_workloads
    from tuner.engine.tasks import TaskInfo

    collect = OmegaConf.load(os.path.join(REPO, "configs", "collect.yaml"))
    by_name = {w.name: w for w in training_workloads(collect.per_kind, collect.seed)}
    if name not in by_name:
        raise SystemExit(f"{name!r} is not a workload of the dataset's generator; choose "
                         f"from: {', '.join(by_name)}")
    wl = by_name[name]
    mod = tvm.IRModule({"main": wl.prim_func()})
    target = tvm.target.Target("llvm")
    return TaskInfo(0, name, float(wl.flops()), 1, ms.ExtractedTask(name, mod, target, [mod], 1))


def run_one(name: str, overrides: list[str], seed: int, trials: int,
            per_round: int | None = None, layout: str = "NCHW") -> dict:
    """``trials`` trials on workload ``name`` in rounds of ``per_round`` (default: one
    round); its best, search seconds and tuning seconds."""
    outcome, rounds, curves, cfg = tune_tasks([workload_task(name, layout)], [
        *overrides, f"trials={trials}", f"trials_per_round={per_round or trials}",
        f"seed={seed}", f"layout={layout}"], prefix="cold-start-")
    return {"workload": name, "seed": seed, "best_ms": outcome.best_ms[0],
            "search_s": sum(r["search_s"] for r in rounds), "trials": outcome.trials_run,
            "rounds": len(rounds), "tuning_seconds": outcome.tuning_seconds,
            **({"layout": layout} if is_network_task(name) else {}),
            "curve": [[c["trial"], c["task_best_ms"]] for c in curves],
            # the model's accuracy on each batch before it was measured (tuner/app/rounds.py)
            "batch_accuracy": [{k: r.get(k) for k in ("trial", "pairwise", "mse_d",
                                                      "novelty", "spread")}
                               for r in rounds],
            "cost_model": cfg.cost_model,
            "checkpoint": cfg.metatune.checkpoint if cfg.cost_model == "metatune" else None,
            "ensemble": cfg.metatune.ensemble if cfg.cost_model == "metatune" else None,
            "xfer_data": cfg.xfer.data if cfg.cost_model == "xgb-xfer" else None}


def best_at(run: dict, trials: int) -> float | None:
    """The best latency (ms) a run had reached after ``trials`` trials, from its curve
    (``None`` without a curve, as in runs recorded before curves were, or before any
    valid measurement)."""
    seen = [ms for trial, ms in run.get("curve") or [] if trial <= trials and ms]
    return min(seen) if seen else None


def _over_base(runs: list[dict], configs: list[str], workloads: list[str],
               value) -> tuple[dict, dict, dict]:
    """Each configuration's per-workload value (median over seeds), the geometric mean
    over workloads of its value over the baseline's, and the same within each seed.

    Args:
        runs: The runs (``config``, ``workload``, ``seed``).
        configs: Configuration names; the first is the baseline.
        workloads: Workload names.
        value: ``run -> float | None``, e.g. its best latency.

    Returns:
        ``{config: {workload: median}}``, ``{config: geomean}``,
        ``{config: {seed: geomean}}`` (paired: the workloads both runs of a seed have).
    """
    best = {c: {w: median([value(r) for r in runs if r["config"] == c
                           and r["workload"] == w]) for w in workloads} for c in configs}
    base = best[configs[0]]
    seeds = sorted({r["seed"] for r in runs})
    by_run = {(r["config"], r["workload"], r["seed"]): value(r) for r in runs}
    overall, each = {}, {}
    for config in configs:
        ratios = [b / base[w] for w, b in best[config].items() if b and base[w]]
        overall[config] = geomean(ratios) if ratios else None
        each[config] = {}
        for seed in seeds:
            pairs = [(by_run.get((config, w, seed)), by_run.get((configs[0], w, seed)))
                     for w in workloads]
            seed_ratios = [a / b for a, b in pairs if a and b]
            each[config][str(seed)] = geomean(seed_ratios) if seed_ratios else None
    return best, overall, each


def batch_pairwise(runs: list[dict], bounds: list[int],
                   key: str = "pairwise") -> dict[str, float | None]:
    """Mean pairwise accuracy of the cost model on each batch before it was measured,
    over the rounds of ``runs`` that end in each budget range: does the model get better
    at ranking the task's candidates as it measures them (online adaptation in tuning)?
    Or the mean of another per-round value (``key``: ``novelty``, ``spread``; see
    :func:`tuner.app.rounds.batch_exploration`).

    Args:
        runs: Runs with ``batch_accuracy`` rows (``trial``, ``pairwise``, ...).
        bounds: Increasing trial counts, e.g. ``[32, 64, 128]``: ranges 1-32, 33-64, ...
        key: The per-round value averaged.

    Returns:
        ``{"1-32": mean or None, "33-64": ..., ...}``.
    """
    out, low = {}, 0
    for high in bounds:
        values = [row[key] for r in runs for row in r.get("batch_accuracy") or []
                  if low < row["trial"] <= high and row.get(key) is not None]
        out[f"{low + 1}-{high}"] = sum(values) / len(values) if values else None
        low = high
    return out


def summarize(runs: list[dict], configs: list[str], at: tuple[int, ...] = (),
              trials: int | None = None) -> dict:
    """Per configuration: best per workload (median over seeds), the geometric mean over
    workloads of its best over the baseline's (overall and per seed), the same after
    each budget in ``at`` (from the runs' curves), and the median search seconds."""
    workloads = list(dict.fromkeys(r["workload"] for r in runs))
    best, overall, each = _over_base(runs, configs, workloads, lambda r: r["best_ms"])
    early = {n: _over_base(runs, configs, workloads, functools.partial(best_at, trials=n))
             for n in at}
    out = {}
    for config in configs:
        mine = [r for r in runs if r["config"] == config]
        ratios = [b / best[configs[0]][w] for w, b in best[config].items()
                  if b and best[configs[0]][w]]
        out[config] = {
            "median_best_ms": best[config],
            "geomean_over_base": overall[config],
            "geomean_over_base_per_seed": each[config],
            "at_trials": {str(n): {"geomean_over_base": e[1][config],
                                   "per_seed": e[2][config]} for n, e in early.items()},
            **{f"batch_{key}": batch_pairwise(
                mine, sorted({*at, trials or max((r.get("trials") or 0 for r in mine),
                                                 default=0)}), key)
               for key in ("pairwise", "novelty", "spread")},
            "workloads_better": sum(x < 1.0 for x in ratios),
            "median_search_s": median([r["search_s"] for r in mine]),
            "median_tuning_s": median([r.get("tuning_seconds") for r in mine]),
            "runs_without_result": sum(r["best_ms"] is None for r in mine),
        }
    return out


def workloads_said(workloads: list[str], layout: str = "NCHW") -> str:
    """What the page's workloads are, for its header."""
    if all(is_network_task(w) for w in workloads):
        return f"built-in networks' tasks (`network/task`, extracted in {layout})"
    if any(is_network_task(w) for w in workloads):
        return ("generated validation workloads and built-in networks' tasks (extracted "
                f"in {layout})")
    return "the checkpoint's validation convolutions (never trained on, not benchmark tasks)"


def sources_said(runs: list[dict]) -> list[str]:
    """One bullet per configuration whose cost model was trained on something: what."""
    said: dict[str, str] = {}
    for r in runs:
        where = r.get("checkpoint") or r.get("xfer_data")
        if where and r.get("ensemble"):  # the checkpoints averaged with it
            where = [where, *r["ensemble"]]
        if where and r["config"] not in said:
            said[r["config"]] = " + ".join(
                os.path.relpath(p, REPO) if os.path.isabs(p) else p
                for p in ([where] if isinstance(where, str) else where))
    return [f"- `{c}` trained on: `{w}`" for c, w in said.items()]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _at_cell(at: dict) -> str:
    """``0.912 (0.900, 0.925) | ``: a geomean after N trials and each seed's."""
    each = ", ".join(_num(v) for v in at["per_seed"].values())
    return f"{_num(at['geomean_over_base'])} ({each}) | "


def _by_range_section(doc: dict, heading: str, text: str,
                      columns: list[tuple[str, str]]) -> list[str]:
    """A page section tabling per-round means by trial range (:func:`batch_pairwise`),
    one row per configuration, the ranges of each ``(summary key, label)`` column group
    side by side; none when the first key has no value in any range."""
    first = columns[0][0]
    ranges = [r for r in dict.fromkeys(r for s in doc["summary"].values()
                                       for r in s.get(first, {}))
              if any(s.get(first, {}).get(r) is not None for s in doc["summary"].values())]
    if not ranges:
        return []
    lines = ["", f"## {heading}", "", text, "",
             "| configuration | " + " | ".join(f"{label} {r}" for _, label in columns
                                               for r in ranges) + " |",
             "|---|" + "---|" * (len(columns) * len(ranges))]
    lines += [f"| {config} | " + " | ".join(_num(s.get(key, {}).get(r)) for key, _ in columns
                                            for r in ranges) + " |"
              for config, s in doc["summary"].items()]
    return lines


def markdown(doc: dict) -> str:
    configs = list(doc["summary"])
    workloads = list(doc["summary"][configs[0]]["median_best_ms"])
    per_round = doc.get("trials_per_round") or doc["trials"]
    at = doc.get("report_at") or []
    title = ("First round: the batch chosen before any measurement of the task"
             if per_round == doc["trials"] else "Tune settings side by side over whole runs")
    budget = (f"one round of {doc['trials']} trials" if per_round == doc["trials"]
              else f"{doc['trials']} trials in rounds of {per_round}")
    lines = [f"# {title}", "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']}",
             *([f"- runs measured {doc['measured'][0]} to {doc['measured'][1]}"]
               if doc.get("measured") else []),
             f"- {budget} per run, seeds {doc['seeds']}, "
             f"{doc['runs_done']} runs; workloads: "
             + workloads_said(workloads, doc.get("layout", "NCHW")),
             *sources_said(doc.get("runs", [])),
             "- configurations (the first is the baseline): "
             + "; ".join(f"`{c}`: `{o}`" for c, o in doc["configs"].items()), "",
             "| configuration | best vs baseline (geomean) | each seed's | "
             + "".join(f"after {n} trials (each seed's) | " for n in at)
             + "workloads better | search s (median) | tuning s (median) | "
             "runs without result | " + " | ".join(workloads) + " |",
             "|---|---|---|---|---|---|---|" + "---|" * (len(workloads) + len(at))]
    for config, s in doc["summary"].items():
        tuning = s.get("median_tuning_s")
        each = ", ".join("-" if v is None else f"{v:.3f}"
                         for v in s.get("geomean_over_base_per_seed", {}).values())
        lines.append(f"| {config} | {_num(s['geomean_over_base'])} | {each or '-'} | "
                     + "".join(_at_cell(s["at_trials"][str(n)]) for n in at)
                     + f"{s['workloads_better']} "
                     f"of {len(workloads)} | {s['median_search_s']:.1f} | "
                     f"{'-' if tuning is None else f'{tuning:.0f}'} | "
                     f"{s['runs_without_result']} | "
                     + " | ".join("-" if s["median_best_ms"][w] is None
                                  else f"{s['median_best_ms'][w]:.3f}" for w in workloads)
                     + " |")
    lines += ["", "Best vs baseline: the geometric mean over workloads of the best latency "
              "over the baseline's (below 1: better), from the per-workload medians over "
              "seeds; each seed's: the same within each seed's runs (paired: same workload, "
              "seed and budget)."
              + (" After N trials: the same comparison of each run's best after its "
                 "first N trials (from the run's curve), as if the budget had been N."
                 if at else ""),
              "", "Per workload: the best latency (ms) of the run, median over the seeds "
              "that measured something. Runs without result: TVM's evolutionary sampler "
              "raised on every try (`The block no longer exists in the IRModule`, seen on "
              "a winograd workload); BO logs it and the run survives, but measures nothing "
              "for that task."]
    lines += _by_range_section(
        doc, "The cost model's ranking of each batch before it was measured",
        "Pairwise accuracy of the model's predictions of each measured batch against the "
        "run times then measured (higher is better; 0.5 is chance), mean over the rounds of "
        "every run whose last trial falls in the range: what the online updates teach the "
        "model about the task while tuning.", [("batch_pairwise", "trials")])
    lines += _by_range_section(
        doc, "How far each batch lay from what the task had measured",
        "Distances between knob vectors (the BO search's, `tuner/search/knobs.py`; "
        "decisions scaled to about [0, 1]), mean over the rounds whose last trial falls in "
        "the range: novelty, from each batch candidate to its nearest earlier measurement "
        "of the task (small: the search stays where it has measured); spread, between two "
        "candidates of one batch.", [("batch_novelty", "novelty"), ("batch_spread", "spread")])
    return "\n".join(lines) + "\n"


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
            lambda: {**run_one(wl, configs[config].split(), seed, args.trials, per_round,
                               args.layout), "config": config}))
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
