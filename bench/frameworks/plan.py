"""The comparison's run plan: its tasks and presets, each task run in a fresh worker
process and each network run through ``tune.py``, resumable from the run records."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
from typing import NamedTuple

from bench.common import REPO, repo_relative

PRESETS = ["xgb", "xgb-Xfer", "RL", "meta-BO", "meta-RL", "meta-BO-T", "meta-RL-T"]
QUICK_TASKS = ["resnet-18/fused_conv2d1_add1_relu11"]
FULL_TASKS = [
    "resnet-18/fused_conv2d1_add1_relu11", "resnet-18/fused_conv2d6_add5_relu31",
    "alexnet/fused_conv2d1_add1_relu11", "vgg-16/fused_conv2d5_add2_relu21",
    "squeezenet/fused_conv2d_add_relu1", "squeezenet/fused_conv2d13_add8_relu81",
]


def this_platform() -> str:
    """This machine's platform as the datasets name it (``llvm-<cpu>``, e.g. ``llvm-znver4``):
    the comparison's run records are kept per platform."""
    from tuner.engine.platforms import platform_id
    from tuner.engine.targets import resolve_target

    return platform_id(resolve_target("llvm").target)


def source_lines(runs: list[dict]) -> list[str]:
    """One markdown bullet per checkpoint or transfer dataset the task runs' cost models
    were trained on, with the presets that used it (records from before 2026-12-01 do not
    say)."""
    used: dict[str, set[str]] = {}
    for r in runs:
        for key in ("checkpoint", "xfer_data"):
            if r.get(key):  # xgb-Xfer may pre-train on several splits
                where = r[key] if isinstance(r[key], str) else " + ".join(r[key])
                if key == "checkpoint" and r.get("ensemble"):  # averaged with it
                    where = " + ".join([where, *r["ensemble"]])
                used.setdefault(where, set()).add(r["preset"])
    return [f"- `{path}`: {', '.join(sorted(presets))}" for path, presets in used.items()]


def network_sources(report: dict) -> dict:
    """A network run's ``report.json`` as :func:`source_lines` reads a task run: its preset
    and what its cost model was trained on, from the report's configuration (where
    ``tune.py`` names the checkpoints and xgb-Xfer's data it used), repository-relative."""
    cfg, cost_model = report.get("config", {}), report.get("cost_model")
    model = cfg.get("metatune", {})
    sources = ({"checkpoint": model.get("checkpoint"), "ensemble": model.get("ensemble")}
               if cost_model == "metatune" else
               {"xfer_data": cfg.get("xfer", {}).get("data")} if cost_model == "xgb-xfer"
               else {})
    return {"preset": report.get("preset"),
            **{k: repo_relative(v) for k, v in sources.items() if v}}


def code_lines(runs: list[dict]) -> list[str]:
    """One markdown bullet per code version (git commit) the runs were measured with, with
    how many runs each: groups measured with different code are pooled, so the page says
    which (records from before 2026-12-02 do not say)."""
    counts: dict[str, int] = {}
    for r in runs:
        code = r.get("code")
        key = "not recorded"
        if code:
            key = f"`{code[:12]}{'-dirty' if code.endswith('-dirty') else ''}`"
        counts[key] = counts.get(key, 0) + 1
    return [f"- {key}: {n} run{'' if n == 1 else 's'}" for key, n in counts.items()]


def finished_report(path: str) -> dict | None:
    """The network run's report at ``path`` if that run finished (has a tuned latency)."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    return report if report.get("latency_ms", {}).get("tuned") is not None else None


class NetworkBudget(NamedTuple):
    """The network runs' budget: in words (for the page), as ``tune.py`` flags, and as the
    label in each run's name (``r<rounds>`` or ``t<trials>``)."""

    words: str
    flags: list[str]
    label: str


def network_budget(args: argparse.Namespace) -> NetworkBudget:
    """The network runs' budget: ``--network-rounds`` rounds of every task when given (the
    trials then follow each network's task count), else ``--network-trials`` in all."""
    rounds = getattr(args, "network_rounds", None)
    if rounds:
        return NetworkBudget(f"{rounds} rounds per task", ["--rounds-per-task", str(rounds)],
                             f"r{rounds}")
    trials = args.network_trials
    return NetworkBudget(f"{trials} trials", ["--trials", str(trials)], f"t{trials}")


def network_run_name(network: str, preset: str, budget: str, seed: int) -> str:
    """The name of a network run's record and work dir, with its budget's label
    (:attr:`NetworkBudget.label`; seed 0 has no seed suffix)."""
    return f"net-{network}-{preset}-{budget}" + (f"-s{seed}" if seed else "")


def tune_networks(args: argparse.Namespace) -> list[dict]:
    """Tune each network with each preset and each of ``--network-seeds`` via ``tune.py``,
    seed by seed; resumable: a finished run's report is read back (from ``--runs-dir``,
    else its work dir), an unfinished one resumes from its work dir's database. A group
    (network, seed: every preset) that another platform has finished is read from there
    (:func:`group_dir`).
    ``torch.compile`` is measured once per network (first seed, first preset)."""
    reports = []
    budget = network_budget(args)
    plan = itertools.product(enumerate(args.network_seeds), args.networks,
                             enumerate(args.presets))
    for (k, seed), network, (i, preset) in plan:
        name = network_run_name(network, preset, budget.label, seed)
        group = [network_run_name(network, p, budget.label, seed) + ".json"
                 for p in args.presets]
        where = group_dir(args.runs_dir, getattr(args, "pool_dirs", []), group)
        record = os.path.join(where, name + ".json")
        report = finished_report(record)
        if report is None:
            work = os.path.join(args.work_root, name)
            report = finished_report(os.path.join(work, "report.json"))
            if report is None and args.report_only:
                continue
            if report is None:
                print(f"{network} {preset} seed {seed}: tuning {budget.words}", flush=True)
                compile_ = "true" if i == 0 and k == 0 else "false"
                cmd = [sys.executable, "tune.py", "--network", network, "--preset", preset,
                       *budget.flags, "--work-dir", os.path.relpath(work, REPO),
                       "--seed", str(seed), "progress=false",
                       f"evaluate.torch_compile={compile_}", *args.overrides]
                subprocess.run(cmd, check=True, cwd=REPO)
                report = finished_report(os.path.join(work, "report.json"))
                if report is None:
                    raise RuntimeError(f"{work}/report.json has no tuned latency; see "
                                       f"{work}/logs and rerun to resume")
            os.makedirs(where, exist_ok=True)
            shutil.copyfile(os.path.join(work, "report.json"), record)
        reports.append(report)
    return reports


def run_name(task: str, preset: str, seed: int) -> str:
    """The file name of one task run's record."""
    return f"{task.replace('/', '__')}-{preset}-{seed}.json"


def group_dir(own: str, others: list[str], names: list[str]) -> str:
    """Where a group's records are read from (and missing ones written): a group is one
    task (or network) and seed, every preset (the record file ``names``), and is measured
    on one machine, so that each comparison with xgb stays within one run. That is ``own``
    (this platform's) when it holds the whole group, else the first of ``others`` (other
    platforms') that holds the whole group, else ``own`` (where a group begun here is
    finished, and a new one begun)."""
    def whole(where: str) -> bool:
        return all(os.path.exists(os.path.join(where, n)) for n in names)

    if whole(own):
        return own
    return next((other for other in others if whole(other)), own)


def run_tasks(args: argparse.Namespace, module: str) -> tuple[list[dict], int]:
    """Run every planned task run (each seed, then each task, then each preset) not yet
    recorded, each in a fresh ``python -m module --worker`` process; resumable: a recorded run is
    read back (with ``--report-only``, a missing one is skipped). A group (task, seed)
    that another platform has finished (``args.pool_dirs``) is read from there, not run
    again, even if this platform began it too; one begun here and finished nowhere else is
    finished here (:func:`group_dir`).

    Args:
        args: The command line (``tasks``, ``presets``, ``seeds``, ``trials``, ``batch``,
            ``runs_dir``, ``pool_dirs``, ``report_only``, ``overrides``).
        module: The module whose ``--worker`` mode runs one task run
            (``bench.compare_frameworks``).

    Returns:
        ``(runs, planned)``: the records of the runs done, and how many runs were planned.
    """
    sub = f"t{args.trials}-b{args.batch}"
    own = os.path.join(args.runs_dir, sub)
    others = [os.path.join(d, sub) for d in getattr(args, "pool_dirs", [])]
    if args.tasks:
        os.makedirs(own, exist_ok=True)
    runs = []
    plan = [(t, s, p) for s in args.seeds for t in args.tasks for p in args.presets]
    for i, (task, seed, preset) in enumerate(plan, 1):
        where = group_dir(own, others, [run_name(task, p, seed) for p in args.presets])
        path = os.path.join(where, run_name(task, preset, seed))
        if not os.path.exists(path) and args.report_only:
            continue
        if not os.path.exists(path):
            print(f"[{i}/{len(plan)}] {task} {preset} seed {seed}", flush=True)
            cmd = [sys.executable, "-m", module, "--trials", str(args.trials),
                   "--batch", str(args.batch), "--worker", task, preset, str(seed), path,
                   *args.overrides]
            subprocess.run(cmd, check=True, cwd=REPO)
        else:
            platform = os.path.basename(os.path.dirname(where))
            done = "done before" + ("" if where == own else f" on {platform}")
            print(f"[{i}/{len(plan)}] {task} {preset} seed {seed}: {done}", flush=True)
        with open(path, encoding="utf-8") as f:
            runs.append(json.load(f))
    return runs, len(plan)


def retime_record_name(network: str, budget: str, seed: int) -> str:
    """The file name of a network group's side-by-side record (``bench.retime_networks``),
    named like its runs (:func:`network_run_name`)."""
    return f"retime-{network}-{budget}" + (f"-s{seed}" if seed else "") + ".json"


def _covers(path: str, presets: list[str]) -> bool:
    """Whether the side-by-side record at ``path`` timed every one of ``presets``."""
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        return set(presets) <= set(json.load(f).get("latency_ms", {}))


def retime_groups(args: argparse.Namespace) -> None:
    """Time each network group tuned here side by side (``bench.retime_networks``) once
    all its presets have finished and their work dirs are here, unless a record of every
    preset exists (in ``--runs-dir`` or another platform's). A group whose work dirs are
    gone is skipped, and one whose timing fails is reported and left for a rerun: its
    runs' own latencies stand, and the page is still written."""
    budget = network_budget(args).label
    for network, seed in itertools.product(args.networks, args.network_seeds):
        name = retime_record_name(network, budget, seed)
        if any(_covers(os.path.join(d, name), args.presets)
               for d in [args.runs_dir, *getattr(args, "pool_dirs", [])]):
            continue
        works = [os.path.join(args.work_root, network_run_name(network, p, budget, seed))
                 for p in args.presets]
        if not all(finished_report(os.path.join(w, "report.json")) for w in works):
            continue
        print(f"{network} seed {seed}: timing the {len(works)} builds side by side", flush=True)
        done = subprocess.run([sys.executable, "-m", "bench.retime_networks",
                               "--network", network, "--budget", budget, "--seed", str(seed),
                               "--presets", *args.presets, "--work-root", args.work_root,
                               "--runs-dir", args.runs_dir], check=False, cwd=REPO)
        if done.returncode != 0:
            print(f"{network} seed {seed}: the side-by-side timing failed (exit "
                  f"{done.returncode}, see above); the page keeps the runs' own latencies, "
                  "and rerunning the command retries it", file=sys.stderr, flush=True)


def side_by_side(args: argparse.Namespace) -> list[dict]:
    """The records of ``bench.retime_networks`` for the page's networks and seeds (each
    network group's builds timed together in one process), from ``--runs-dir`` and the
    other platforms' runs dirs; the first found per network and seed."""
    budget = network_budget(args).label
    out = []
    for network, seed in itertools.product(args.networks, args.network_seeds):
        name = retime_record_name(network, budget, seed)
        for where in [args.runs_dir, *getattr(args, "pool_dirs", [])]:
            path = os.path.join(where, name)
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    out.append(json.load(f))
                break
    return out
