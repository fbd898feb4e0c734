"""The tuning frameworks side by side on held-out convolutions (paper Figures 5-6, 9; Table 4).

Every framework (preset) tunes the same held-out convolution tasks (tasks of the four
networks; the cost models never trained on them) with the same budget, batch size and
seeds, each run in a fresh process, frameworks alternating run by run. Reported:

- search efficiency: best latency against measured trials (median and spread over seeds),
  the trials each framework needs to reach xgb's final best, and its final best over xgb's;
- cost-model accuracy while tuning: the median over rounds of MSE, MSE(D) and pairwise
  ranking accuracy of each new batch before it was measured (Table 4), and their curves
  over the first rounds (Figure 9);
- with ``--networks``, end to end (paper Table 3): each network tuned by each framework at
  the same budget with ``tune.py`` (``--network-seeds``, default the first seed), its tuned
  latency beside the untuned build, PyTorch eager and ``torch.compile``, and the tuning
  wall time;
- where MetaTune loses: every task (final best, best at equal tuning time) and network on
  which a MetaTune preset is slower than xgb or xgb-Xfer, written from the numbers.

Each run's record (curve, per-round accuracy and timings; a few KB) is written to
``--runs-dir`` (committed, ``docs/bench/runs``) as it finishes, and each network run's
``report.json`` is copied there too; the networks' tuning work dirs (databases) live under
``--work-root``. Rerun the same command to resume; ``--report-only`` writes the page from
the runs done so far (the page says how many of the planned runs it holds). Runs go seed by
seed, so that a partial run covers every task.

Usage:
    python bench/compare_frameworks.py --quick          # about 15 minutes
    python bench/compare_frameworks.py                  # a few hours; resumable
    python bench/compare_frameworks.py --networks alexnet resnet-18 squeezenet vgg-16 \
        --network-trials 256                            # and the networks end to end
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import os
import shutil
import subprocess
import sys

from common import REPO, geomean, median, provenance, write_results

PRESETS = ["xgb", "xgb-Xfer", "meta-BO", "meta-BO-T"]
BASELINE = "xgb"
BASELINES = ("xgb", "xgb-Xfer")  # TVM's own tuners; every other preset is MetaTune
EARLY_ROUNDS = 8  # rounds shown in the early-iteration accuracy curves (paper Figure 9)
QUICK_TASKS = ["resnet-18/fused_conv2d1_add1_relu1"]
FULL_TASKS = [
    "resnet-18/fused_conv2d1_add1_relu1", "resnet-18/fused_conv2d6_add5_relu3",
    "alexnet/fused_conv2d1_add1_relu1", "vgg-16/fused_conv2d5_add2_relu2",
    "squeezenet/fused_conv2d_add_relu", "squeezenet/fused_conv2d13_add8_relu8",
]


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one task, 2 seeds, 64 trials")
    p.add_argument("--tasks", nargs="+", help="network/task names (default: see --quick)")
    p.add_argument("--presets", nargs="+", default=PRESETS)
    p.add_argument("--seeds", type=int, nargs="+")
    p.add_argument("--trials", type=int)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--networks", nargs="*", default=[],
                   help="also tune these whole networks with every preset (end to end)")
    p.add_argument("--network-trials", type=int, default=512)
    p.add_argument("--network-seeds", type=int, nargs="+",
                   help="seeds of the network runs (default: the first of --seeds)")
    p.add_argument("--runs-dir", default="docs/bench/runs",
                   help="where each finished run's record goes (small JSON; committed)")
    p.add_argument("--work-root", default="work/bench/frameworks",
                   help="the networks' tuning work dirs (databases, logs)")
    p.add_argument("--report-only", action="store_true",
                   help="write the page from the runs done so far; run nothing")
    p.add_argument("--out", help="page prefix (default: docs/bench/frameworks, with --quick "
                                 "docs/bench/frameworks-quick)")
    p.add_argument("--worker", nargs=4, metavar=("TASK", "PRESET", "SEED", "OUT"),
                   help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="tune config overrides for every run")
    args = p.parse_args()
    args.tasks = args.tasks or (QUICK_TASKS if args.quick else FULL_TASKS)
    args.seeds = args.seeds or ([0, 1] if args.quick else [0, 1, 2])
    args.network_seeds = args.network_seeds or args.seeds[:1]
    args.trials = args.trials or (64 if args.quick else 256)
    args.out = args.out or ("docs/bench/frameworks-quick" if args.quick
                            else "docs/bench/frameworks")
    return args


def trials_to_reach(curve: list[list[float]], target_ms: float) -> float | None:
    """The first x (trials, or seconds for a :func:`time_curve`) whose best-so-far is at
    most ``target_ms`` (``None``: never)."""
    for x, best in curve:
        if best is not None and best <= target_ms * (1 + 1e-9):
            return x
    return None


def time_curve(run: dict) -> list[list[float]]:
    """``[[seconds, best_ms]]`` per round: the run's best after each round against its
    cumulative search + measurement + model-update seconds (the run's tuning time)."""
    best = {int(t): b for t, b in run["curve"]}
    out, seconds = [], 0.0
    for r in run["rounds"]:
        seconds += sum(r.get(key) or 0.0 for key in ("search_s", "measure_s", "update_s"))
        if r.get("trial") in best:
            out.append([seconds, best[r["trial"]]])
    return out


def best_at(curve: list[list[float]], x: float) -> float | None:
    """Best-so-far latency at ``x`` trials (or seconds, for a :func:`time_curve`): that of
    the last round not past it; ``None`` before the first."""
    best = None
    for t, b in curve:
        if t > x:
            break
        best = b
    return best


def equal_time_budgets(runs: list[dict]) -> dict[int, float]:
    """Per seed, the shortest tuning time (search + measurement + model update, as
    :func:`time_curve` counts it) of the runs given, all of one task: the wall-time budget
    at which every framework is compared with equal time.

    Only seeds that every preset among ``runs`` has finished get a budget (in a partial
    run, the seed under way has none), and only runs with round timings count.
    """
    presets = {r["preset"] for r in runs}
    ends: dict[int, dict[str, float]] = {}
    for r in runs:
        curve = time_curve(r)
        if curve and curve[-1][0] > 0:
            ends.setdefault(r["seed"], {})[r["preset"]] = curve[-1][0]
    return {seed: min(v.values()) for seed, v in ends.items() if set(v) == presets}


def summarize(runs: list[dict], presets: list[str], trials: int, batch: int) -> dict:
    """Per task and preset: final bests, curves, trials to xgb's best, bests at equal
    tuning time, accuracy."""
    out: dict = {}
    grid = list(range(batch, trials + 1, batch))
    for task in dict.fromkeys(r["task"] for r in runs):
        per_task = {}
        base = [r for r in runs if r["task"] == task and r["preset"] == BASELINE]
        base_final = median([r["best_ms"] for r in base])
        budgets = equal_time_budgets([r for r in runs if r["task"] == task])
        base_at_time = _median_or_inf([best_at(time_curve(r), budgets[r["seed"]])
                                       for r in base if r["seed"] in budgets])
        for preset in presets:
            mine = sorted((r for r in runs if r["task"] == task and r["preset"] == preset),
                          key=lambda r: r["seed"])
            if not mine:
                continue
            curves = [[best_at(r["curve"], t) for t in grid] for r in mine]
            rounds = [x for r in mine for x in r["rounds"]]
            reach = [trials_to_reach(r["curve"], base_final) for r in mine] if base_final else []
            final = median([r["best_ms"] for r in mine])
            times = [time_curve(r) for r in mine]
            reach_s = [trials_to_reach(t, base_final) for t in times] if base_final else []
            at_time = [best_at(t, budgets[r["seed"]]) for t, r in zip(times, mine)
                       if r["seed"] in budgets]
            at_time_median = _median_or_inf(at_time)
            per_task[preset] = {
                "seeds": [r["seed"] for r in mine],
                "final_ms": [r["best_ms"] for r in mine],
                "median_final_ms": final,
                "final_over_xgb": (final / base_final) if final and base_final else None,
                "trials_to_xgb_best": reach,
                "seconds_to_xgb_best": reach_s,
                "time_curves": times,
                "equal_time_s": [budgets[r["seed"]] for r in mine if r["seed"] in budgets],
                "equal_time_ms": at_time,
                "median_equal_time_ms": at_time_median,
                "equal_time_over_xgb": (at_time_median / base_at_time
                                        if at_time_median and base_at_time else None),
                "curve_trials": grid,
                "curve_median_ms": [median(list(col)) for col in zip(*curves)],
                "curve_min_ms": [min((v for v in col if v), default=None) for col in zip(*curves)],
                "curve_max_ms": [max((v for v in col if v), default=None) for col in zip(*curves)],
                "median_mse": median([x.get("mse") for x in rounds]),
                "median_mse_d": median([x.get("mse_d") for x in rounds]),
                "median_pairwise": median([x.get("pairwise") for x in rounds]),
                **{f"early_{key}": [median([r["rounds"][i].get(key) for r in mine
                                            if i < len(r["rounds"])])
                                    for i in range(EARLY_ROUNDS)]
                   for key in ("mse", "mse_d", "pairwise")},
                "tuning_seconds": median([r["tuning_seconds"] for r in mine]),
            }
        out[task] = per_task
    return out


def _median_or_inf(values: list[float | None]) -> float | None:
    """Median of ``values``, counting ``None`` (no result by then) as infinitely slow;
    ``None`` for no values or an infinite median."""
    m = median([math.inf if v is None else v for v in values])
    return None if m is None or math.isinf(m) else m


def _median_reach(per: list[dict], key: str) -> float | None:
    """Median over all runs of ``key`` (trials or seconds to xgb's best), counting runs that
    never reached it as infinite; ``None`` when that median is infinite."""
    return _median_or_inf([v for s in per for v in s[key]])


def overall(summary: dict, presets: list[str]) -> dict:
    """Per preset, across tasks: the geometric mean of final best over xgb's, of best at
    equal tuning time over xgb's and of best after the first round (median over seeds)
    over xgb's, on how many tasks it beat xgb, the median over runs of
    the trials and of the tuning seconds to xgb's best (``None`` when most runs never
    reached it), and the median over tasks of its tuning time over xgb's.

    Args:
        summary: ``summarize``'s output.
        presets: The presets, in table order.

    Returns:
        ``{preset: {"geomean_over_xgb", "equal_time_geomean_over_xgb",
        "first_round_geomean_over_xgb", "tasks_better",
        "tasks", "median_trials_to_xgb_best", "median_seconds_to_xgb_best",
        "runs_reaching_xgb_best", "runs", "tuning_time_over_xgb"}}``.
    """
    out = {}
    for preset in presets:
        pairs = [(t[preset], t[BASELINE]) for t in summary.values()
                 if preset in t and BASELINE in t]
        per = [mine for mine, _ in pairs]
        ratios = [s["final_over_xgb"] for s in per if s["final_over_xgb"]]
        if not ratios:
            continue
        times = [mine["tuning_seconds"] / base["tuning_seconds"] for mine, base in pairs
                 if mine["tuning_seconds"] and base["tuning_seconds"]]
        out[preset] = {
            "geomean_over_xgb": geomean(ratios),
            "equal_time_geomean_over_xgb": geomean([s.get("equal_time_over_xgb")
                                                    for s in per]),
            "first_round_geomean_over_xgb": geomean([
                mine["curve_median_ms"][0] / base["curve_median_ms"][0]
                for mine, base in pairs if mine["curve_median_ms"] and base["curve_median_ms"]
                and mine["curve_median_ms"][0] and base["curve_median_ms"][0]]),
            "tasks_better": sum(r < 1.0 for r in ratios), "tasks": len(ratios),
            "median_trials_to_xgb_best": _median_reach(per, "trials_to_xgb_best"),
            "median_seconds_to_xgb_best": _median_reach(per, "seconds_to_xgb_best"),
            "runs_reaching_xgb_best": sum(v is not None for s in per
                                          for v in s["trials_to_xgb_best"]),
            "runs": sum(len(s["trials_to_xgb_best"]) for s in per),
            "tuning_time_over_xgb": median(times),
        }
    return out


def early_accuracy(summary: dict, presets: list[str]) -> dict:
    """Per preset, the median over tasks of each early round's MSE, MSE(D) and pairwise
    accuracy (round ``i`` = the ``i``-th batch, predicted before it was measured)."""
    out = {}
    for preset in presets:
        per = [t[preset] for t in summary.values() if preset in t]
        if per:
            out[preset] = {key: [median([s[f"early_{key}"][i] for s in per])
                                 for i in range(EARLY_ROUNDS)]
                           for key in ("mse", "mse_d", "pairwise")}
    return out


def _finished(path: str) -> dict | None:
    """The network run's report at ``path`` if that run finished (has a tuned latency)."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    return report if report.get("latency_ms", {}).get("tuned") is not None else None


def network_run_name(network: str, preset: str, trials: int, seed: int) -> str:
    """The name of a network run's record and work dir (seed 0 has no seed suffix)."""
    return f"net-{network}-{preset}-t{trials}" + (f"-s{seed}" if seed else "")


def tune_networks(args: argparse.Namespace) -> list[dict]:
    """Tune each network with each preset and each of ``--network-seeds`` via ``tune.py``,
    seed by seed; resumable: a finished run's report is read back (from ``--runs-dir``,
    else its work dir), an unfinished one resumes from its work dir's database.
    ``torch.compile`` is measured once per network (first seed, first preset)."""
    reports = []
    plan = itertools.product(enumerate(args.network_seeds), args.networks,
                             enumerate(args.presets))
    for (k, seed), network, (i, preset) in plan:
        name = network_run_name(network, preset, args.network_trials, seed)
        record = os.path.join(args.runs_dir, name + ".json")
        report = _finished(record)
        if report is None:
            work = os.path.join(args.work_root, name)
            report = _finished(os.path.join(work, "report.json"))
            if report is None and args.report_only:
                continue
            if report is None:
                print(f"{network} {preset} seed {seed}: tuning {args.network_trials} trials",
                      flush=True)
                compile_ = "true" if i == 0 and k == 0 else "false"
                cmd = [sys.executable, "tune.py", "--network", network, "--preset", preset,
                       "--trials", str(args.network_trials), "--work-dir", work,
                       "--seed", str(seed), "progress=false",
                       f"evaluate.torch_compile={compile_}", *args.overrides]
                subprocess.run(cmd, check=True, cwd=REPO)
                report = _finished(os.path.join(work, "report.json"))
                if report is None:
                    raise RuntimeError(f"{work}/report.json has no tuned latency; see "
                                       f"{work}/logs and rerun to resume")
            os.makedirs(args.runs_dir, exist_ok=True)
            shutil.copyfile(os.path.join(work, "report.json"), record)
        reports.append(report)
    return reports


def network_rows(reports: list[dict]) -> list[dict]:
    """One row per (network, preset) for the end-to-end table: medians over its seeds'
    runs (each run's own value listed per seed for the tuned latency)."""
    rows = []
    compiled = {r["network"]: r["latency_ms"].get("torch_compile") for r in reports
                if r["latency_ms"].get("torch_compile")}
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in reports:
        groups.setdefault((r["network"], r["preset"]), []).append(r)
    for (network, preset), runs in groups.items():
        runs = sorted(runs, key=lambda r: r.get("config", {}).get("seed") or 0)
        lat = [r["latency_ms"] for r in runs]
        tasks = [r["tasks"] for r in runs if "tasks" in r]
        rows.append({
            "network": network, "preset": preset,
            "seeds": [r.get("config", {}).get("seed") for r in runs],
            "trials": median([r["trials_total"] for r in runs]),
            "tuned_ms": median([x["tuned"] for x in lat]),
            "tuned_ms_per_seed": [x["tuned"] for x in lat],
            "untuned_ms": median([x["untuned"] for x in lat]),
            "torch_ms": median([x["torch"] for x in lat]),
            "torch_compile_ms": compiled.get(network),
            "speedup_over_untuned": median([x["untuned"] / x["tuned"] for x in lat
                                            if x["tuned"] and x["untuned"]]),
            "tuning_minutes": median([r["tuning_seconds"] / 60.0 for r in runs]),
            "tasks": len(tasks[0]) if tasks else None,
            "tasks_measured": (median([sum(1 for t in ts if t.get("best_ms")) for ts in tasks])
                               if tasks else None),
            "trials_per_round": runs[0].get("config", {}).get("trials_per_round"),
        })
    return rows


def _fmt(v, spec=".3f") -> str:
    return "-" if v is None else format(v, spec)


def _rounds_note(rows: list[dict]) -> str:
    """A sentence for the end-to-end table when its budget allows two rounds per measured
    task or fewer: then the rows mostly compare the frameworks' first rounds."""
    rounds = median([r["trials"] / r["tasks_measured"] / r["trials_per_round"] for r in rows
                     if r.get("tasks_measured") and r.get("trials_per_round")])
    if rounds is None or rounds > 2:
        return ""
    return (f" At about {rounds:.1f} rounds per measured task (median), these rows compare "
            "mostly the frameworks' first rounds (no measurement of the task yet), not "
            "their search.")


def losses(doc: dict) -> list[str]:
    """Where MetaTune's presets lose, one markdown bullet each: every task whose median final
    best, or median best at equal tuning time, is slower than a baseline's (xgb, xgb-Xfer),
    and every network whose tuned latency is.

    Args:
        doc: The page's document (``presets``, ``summary``, optional ``networks`` rows).

    Returns:
        The bullets (markdown lines); one saying so when MetaTune never loses, or when there
        was nothing to compare.
    """
    ours = [p for p in doc["presets"] if p not in BASELINES]
    theirs = [p for p in doc["presets"] if p in BASELINES]
    out, compared = [], 0

    def compare(where: str, values: dict, spec: str) -> None:
        nonlocal compared
        for mine in ours:
            pairs = [b for b in theirs if values.get(b) and values.get(mine)]
            compared += len(pairs)
            behind = [f"{b} {values[b]:{spec}} ms ({values[mine] / values[b]:.3f}x)"
                      for b in pairs if values[mine] > values[b]]
            if behind:
                out.append(f"- {where}: {mine} {values[mine]:{spec}} ms is behind "
                           + ", ".join(behind))

    for task, per in doc["summary"].items():
        compare(f"{task}, final best", {p: s["median_final_ms"] for p, s in per.items()},
                ".3f")
        compare(f"{task}, best at equal tuning time",
                {p: s.get("median_equal_time_ms") for p, s in per.items()}, ".3f")
    rows = doc.get("networks") or []
    for net in dict.fromkeys(r["network"] for r in rows):
        compare(f"{net} end to end",
                {r["preset"]: r["tuned_ms"] for r in rows if r["network"] == net}, ".2f")
    if not compared:
        return ["- nothing to compare yet"]
    if not out:
        out.append("- nowhere: on every task and network measured, each MetaTune preset is at "
                   f"least as fast as {' and '.join(theirs)}")
    return out


def versus_pytorch(rows: list[dict]) -> list[str]:
    """One markdown bullet per network: its fastest TVM build against PyTorch eager (median
    of the eager runs beside the network's tuning runs) and ``torch.compile``.

    Args:
        rows: :func:`network_rows`' rows.
    """
    out = []
    for net in dict.fromkeys(r["network"] for r in rows):
        mine = [r for r in rows if r["network"] == net]
        built = [r for r in mine if r["tuned_ms"]]
        if not built:
            continue
        best = min(built, key=lambda r: r["tuned_ms"])
        eager = median([r["torch_ms"] for r in mine])
        vs = [f"{best['tuned_ms'] / eager:.2f}x PyTorch eager's ({eager:.2f} ms)"] if eager else []
        if best.get("torch_compile_ms"):
            vs.append(f"{best['tuned_ms'] / best['torch_compile_ms']:.2f}x torch.compile's "
                      f"({best['torch_compile_ms']:.2f} ms)")
        if vs:
            out.append(f"- {net}: the fastest TVM build ({best['preset']}, "
                       f"{best['tuned_ms']:.2f} ms) takes " + " and ".join(vs))
    return out


def markdown(doc: dict) -> str:
    lines = ["# Tuning frameworks side by side on held-out convolutions", "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']}",
             *([f"- task runs measured {doc['measured'][0]} to {doc['measured'][1]}"]
               if doc.get("measured") else []),
             f"- {doc['trials']} trials per run, {doc['batch']} per round, seeds {doc['seeds']}; "
             "each run a fresh process; same tasks, budgets and seeds for every framework",
             "- presets: xgb = MetaSchedule XGBoost + evolutionary; xgb-Xfer = XGBoost with "
             "transfer from the training split; meta-BO / meta-BO-T = MetaTune (plain / "
             "super-graph) + batch BO"]
    if doc.get("runs_done", 0) < doc.get("runs_planned", 0):
        lines.append(f"- **partial**: {doc['runs_done']} of the {doc['runs_planned']} planned "
                     "task runs are done (rerun the command to resume); medians are over the "
                     "seeds done so far")
    if doc.get("network_runs_done", 0) < doc.get("networks_planned", 0):
        lines.append(f"- **partial**: {doc['network_runs_done']} of the "
                     f"{doc['networks_planned']} planned network runs are done (rerun the "
                     "command to resume)")
    lines.append("")
    if doc.get("overall"):
        lines += ["## All tasks", "",
                  "| framework | final best vs xgb (geomean) | at equal time vs xgb (geomean) "
                  "| first round vs xgb (geomean) | tasks better than xgb | "
                  "runs reaching xgb's best | median trials to xgb's best | "
                  "median seconds to xgb's best | tuning time vs xgb |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for preset, o in doc["overall"].items():
            lines.append(
                f"| {preset} | {_fmt(o['geomean_over_xgb'])} | "
                f"{_fmt(o.get('equal_time_geomean_over_xgb'))} | "
                f"{_fmt(o.get('first_round_geomean_over_xgb'))} | {o['tasks_better']} of "
                f"{o['tasks']} | {o['runs_reaching_xgb_best']} of {o['runs']} | "
                f"{_fmt(o['median_trials_to_xgb_best'], '.0f')} | "
                f"{_fmt(o.get('median_seconds_to_xgb_best'), '.0f')} | "
                f"{_fmt(o['tuning_time_over_xgb'], '.2f')} |")
        lines.append("")
    if doc.get("presets"):
        lines += ["## Where MetaTune loses", "", *losses(doc), ""]
        if doc.get("networks"):
            lines += ["## Against PyTorch on the same CPU", "",
                      *versus_pytorch(doc["networks"]), ""]
    for task, per in doc["summary"].items():
        lines += [f"## {task}", "",
                  "| framework | final best ms (median) | per seed | vs xgb | at equal time vs xgb "
                  "| trials to xgb's best "
                  "| seconds to xgb's best | MSE | MSE(D) | pairwise | tuning s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for preset, s in per.items():
            seeds = ", ".join(_fmt(v) for v in s["final_ms"])
            reach = ", ".join(_fmt(v, ".0f") for v in s["trials_to_xgb_best"])
            reach_s = ", ".join(_fmt(v, ".0f") for v in s.get("seconds_to_xgb_best", []))
            lines.append(
                f"| {preset} | {_fmt(s['median_final_ms'])} | {seeds} | "
                f"{_fmt(s['final_over_xgb'])} | {_fmt(s.get('equal_time_over_xgb'))} | "
                f"{reach or '-'} | {reach_s or '-'} | "
                f"{_fmt(s['median_mse'])} | "
                f"{_fmt(s['median_mse_d'])} | {_fmt(s['median_pairwise'])} | "
                f"{_fmt(s['tuning_seconds'], '.0f')} |")
        lines += ["", f"![curves]({os.path.basename(doc['png'][task])})", ""]
    if doc.get("early_accuracy"):
        lines += ["## Cost-model accuracy in the first rounds (paper Figure 9)", "",
                  "Median over tasks and seeds of each round's batch, predicted before it was "
                  "measured (round 1 = no measurement of the task yet).", "",
                  "| framework | metric | " + " | ".join(f"r{i + 1}" for i in range(EARLY_ROUNDS))
                  + " |", "|---|---|" + "---|" * EARLY_ROUNDS]
        for preset, e in doc["early_accuracy"].items():
            for key, name in (("mse", "MSE"), ("mse_d", "MSE(D)"), ("pairwise", "pairwise")):
                lines.append(f"| {preset} | {name} | "
                             + " | ".join(_fmt(v) for v in e[key]) + " |")
        lines += ["", f"![accuracy]({os.path.basename(doc['png_accuracy'])})", ""]
    if doc.get("networks"):
        lines += ["## End to end (paper Table 3)", "",
                  "| network | framework | trials | tasks measured | tuned ms (median) | "
                  "per seed | untuned ms | speedup | PyTorch eager ms | torch.compile ms | "
                  "tuning min |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in doc["networks"]:
            per_seed = ", ".join(_fmt(v, ".2f") for v in r.get("tuned_ms_per_seed", []))
            lines.append(
                f"| {r['network']} | {r['preset']} | {_fmt(r['trials'], '.0f')} | "
                f"{_fmt(r.get('tasks_measured'), '.0f')} of {_fmt(r.get('tasks'), 'd')} | "
                f"{_fmt(r['tuned_ms'], '.2f')} | {per_seed or '-'} "
                f"| {_fmt(r['untuned_ms'], '.1f')} | {_fmt(r['speedup_over_untuned'], '.1f')} | "
                f"{_fmt(r['torch_ms'], '.2f')} | {_fmt(r['torch_compile_ms'], '.2f')} | "
                f"{_fmt(r['tuning_minutes'], '.1f')} |")
        seeds = doc.get("network_seeds") or [0]
        lines += ["", f"Seeds per network: {', '.join(map(str, seeds))} (medians over the "
                  "seeds done); tuned and untuned are TVM builds of the same model, PyTorch "
                  "eager and torch.compile run it on the same CPU (torch.compile once per "
                  "network). Tasks measured: the tasks the budget reached (the others keep "
                  "TVM's default schedule)." + _rounds_note(doc["networks"]), ""]
        if doc.get("png_networks"):
            lines += [f"![end to end]({os.path.basename(doc['png_networks'])})", ""]
    lines += ["vs xgb: median final best over xgb's (below 1 is better). Trials to xgb's best: "
              "per seed, the measured trials after which the framework's best was at least "
              "as fast as xgb's median final best ('-': not within the budget); seconds to "
              "xgb's best: the same in tuning seconds (search + measurement + model update "
              "of every round; set-up before the first round, such as loading a checkpoint "
              "or fitting xgb-Xfer's transfer model, is not counted). "
              "At equal time vs xgb: per seed, every framework's best after the tuning time "
              "of that seed's fastest run (the rounds it finished by then), median over seeds "
              "every framework has finished, over xgb's. First round: the best of the "
              "first batch, before any measurement of the task (median over seeds), over "
              "xgb's. MSE, MSE(D), "
              "pairwise: the cost model on each new batch before it was measured, median over "
              "rounds (paper Table 4)."]
    return "\n".join(lines) + "\n"


def _pyplot():
    """``matplotlib.pyplot`` on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(summary: dict, out_prefix: str) -> dict[str, str]:
    plt = _pyplot()
    paths = {}
    for i, (task, per) in enumerate(summary.items()):
        fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for preset, s in per.items():
            x = s["curve_trials"]
            line, = ax.plot(x, s["curve_median_ms"], label=preset)
            lo = [v if v is not None else float("nan") for v in s["curve_min_ms"]]
            hi = [v if v is not None else float("nan") for v in s["curve_max_ms"]]
            ax.fill_between(x, lo, hi, alpha=0.15)
            for j, curve in enumerate(s.get("time_curves", [])):
                ax_t.plot([c[0] for c in curve], [c[1] for c in curve], color=line.get_color(),
                          alpha=0.7, linewidth=1, label=preset if j == 0 else None)
        ax.set_xlabel("measured trials (median, band: min-max over seeds)")
        ax.set_ylabel("best latency (ms)")
        ax.set_title(task)
        ax.legend()
        ax_t.set_xlabel("tuning seconds (one line per seed)")
        ax_t.legend()
        fig.tight_layout()
        path = f"{out_prefix}-{i}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths[task] = path
    return paths


def plot_accuracy(early: dict, out_prefix: str) -> str:
    """MSE and MSE(D) of each framework's cost model over the first rounds (Figure 9)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for preset, e in early.items():
        for ax, key in zip(axes, ("mse", "mse_d")):
            points = [(i + 1, v) for i, v in enumerate(e[key]) if v is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=preset)
    for ax, name in zip(axes, ("MSE", "MSE(D), top 25 %")):
        ax.set_xlabel("round (batch predicted before it is measured)")
        ax.set_ylabel(name)
        ax.legend()
    fig.tight_layout()
    path = f"{out_prefix}-accuracy.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_networks(rows: list[dict], out_prefix: str) -> str:
    """Tuned latency per network and framework, as a multiple of PyTorch eager's (the
    median of the eager latencies measured beside that network's runs)."""
    plt = _pyplot()
    networks = list(dict.fromkeys(r["network"] for r in rows))
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    eager = {net: median([r["torch_ms"] for r in rows if r["network"] == net])
             for net in networks}
    width = 0.8 / (len(presets) + 1)
    fig, ax = plt.subplots(figsize=(2 + 1.6 * len(networks), 4))
    for j, preset in enumerate(presets):
        ys = []
        for net in networks:
            r = next((r for r in rows if r["network"] == net and r["preset"] == preset), None)
            ys.append(r["tuned_ms"] / eager[net] if r and r["tuned_ms"] and eager[net]
                      else float("nan"))
        ax.bar([i + j * width for i in range(len(networks))], ys, width, label=preset)
    compiled = [next((r["torch_compile_ms"] / eager[net] for r in rows if r["network"] == net
                      and r["torch_compile_ms"] and eager[net]), float("nan"))
                for net in networks]
    ax.bar([i + len(presets) * width for i in range(len(networks))], compiled, width,
           label="torch.compile", color="grey")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * len(presets) / 2 for i in range(len(networks))], networks)
    ax.set_ylabel("latency / PyTorch eager (lower is better)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = f"{out_prefix}-networks.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main() -> None:
    args = _parse()
    if args.worker:
        from common import tune_one_task

        task, preset, seed, out = args.worker
        network, name = task.split("/", 1)
        run = tune_one_task(network, name, preset, int(seed), args.trials, args.batch,
                            args.overrides)
        run["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        with open(out + ".tmp", "w", encoding="utf-8") as f:
            json.dump(run, f)
        os.replace(out + ".tmp", out)
        return
    sys.path.insert(0, REPO)
    os.chdir(REPO)
    runs_dir = os.path.join(args.runs_dir, f"t{args.trials}-b{args.batch}")
    os.makedirs(runs_dir, exist_ok=True)
    runs = []
    plan = [(t, s, p) for s in args.seeds for t in args.tasks for p in args.presets]
    for i, (task, seed, preset) in enumerate(plan, 1):
        path = os.path.join(runs_dir, f"{task.replace('/', '__')}-{preset}-{seed}.json")
        if not os.path.exists(path) and args.report_only:
            continue
        if not os.path.exists(path):
            print(f"[{i}/{len(plan)}] {task} {preset} seed {seed}", flush=True)
            cmd = [sys.executable, os.path.abspath(__file__), "--trials", str(args.trials),
                   "--batch", str(args.batch), "--worker", task, preset, str(seed), path,
                   *args.overrides]
            subprocess.run(cmd, check=True, cwd=REPO)
        else:
            print(f"[{i}/{len(plan)}] {task} {preset} seed {seed}: done before", flush=True)
        with open(path, encoding="utf-8") as f:
            runs.append(json.load(f))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    summary = summarize(runs, args.presets, args.trials, args.batch)
    early = early_accuracy(summary, args.presets)
    reports = tune_networks(args) if args.networks else []
    networks = network_rows(reports)
    prov = provenance("compare_frameworks.py")
    # The page's command is the one that measures (and resumes); --report-only only rewrites it.
    prov["command"] = prov["command"].replace(" --report-only", "")
    dates = sorted(r["date"] for r in runs if r.get("date"))
    doc = {**prov, "measured": [dates[0], dates[-1]] if dates else None,
           "tasks": args.tasks, "presets": args.presets, "seeds": args.seeds,
           "trials": args.trials, "batch": args.batch,
           "runs_done": len(runs), "runs_planned": len(plan),
           "overall": overall(summary, args.presets), "early_accuracy": early,
           "summary": summary, "png": plot(summary, args.out),
           "png_accuracy": plot_accuracy(early, args.out), "networks": networks,
           "png_networks": plot_networks(networks, args.out) if networks else None,
           "network_runs_done": len(reports), "network_seeds": args.network_seeds,
           "networks_planned": len(args.networks) * len(args.presets) * len(args.network_seeds)}
    write_results(args.out + ".json", args.out + ".md", doc, markdown(doc))


if __name__ == "__main__":
    main()
