"""The tuning memory's reuse: a second network that shares shapes with a first tunes for less.

Three ``tune.py`` runs at the same budget (``tune.py``'s default unless ``--trials``) and
settings, schedule transfer from the shipped datasets included; only the memory differs:

1. ``first``: resnet-18 on a fresh memory (``<work-root>/memory``);
2. ``second-with-memory``: resnet-34 (``torchvision.models:resnet34``) with that memory;
3. ``second-alone``: resnet-34 with an empty memory of its own (``<work-root>/memory-empty``).

Each run records its tuning wall time (the tuning loop, and ``tune.py`` end to end with its
evaluation off), the trials it measured, and the tasks that came from the memory. Then one
process builds both resnet-34 work dirs (the same weights: the network as ``tune.py``
imports it) and times the two builds side by side in alternating rounds
(:func:`tuner.engine.timing.interleaved`), each output checked against the reference.

Every step's record goes to ``docs/bench/runs/memory-reuse/<platform>/<step>.json``; a step
with a record is not run again (``first`` starts from a fresh memory and work dir when it
has none). The page: ``docs/bench/memory-reuse.md`` and ``.json``.

Examples:
    python -m bench.memory_reuse                  # tune.py's default budget (128 trials)
    python -m bench.memory_reuse --dry-run        # print the steps, run nothing
    python -m bench.memory_reuse --report-only    # rewrite the page from the records
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from bench.common import (
    REPO,
    in_repo,
    machine_lines,
    measured_span,
    network_args,
    provenance,
    recorded_run,
    run_command,
    write_results,
)

RUNS = "docs/bench/runs/memory-reuse"
OUT = "docs/bench/memory-reuse"
FIRST, SECOND = "resnet-18", "torchvision.models:resnet34"
#: The tuning steps: name -> (which network, which memory, what it shows).
STEPS = {"first": ("first", "memory", "the first network, fresh memory"),
         "second-with-memory": ("second", "memory", "the second network, after the first"),
         "second-alone": ("second", "memory-empty", "the second network, empty memory")}
SIDE_BY_SIDE = "side-by-side"


def tune_command(step: str, networks: dict[str, str], work_root: str, trials: int,
                 extra: list[str]) -> tuple[list[str], str]:
    """The ``tune.py`` command of a tuning step, and its work dir."""
    which, memory, _ = STEPS[step]
    work_dir = os.path.join(work_root, step)
    cmd = [sys.executable, os.path.join(REPO, "tune.py"), *network_args(networks[which]),
           "--trials", str(trials), "--work-dir", work_dir,
           f"memory.path={os.path.join(work_root, memory)}", "evaluate.enabled=false",
           "progress=false", "tensorboard=false", *extra]
    return cmd, work_dir


def shown(cmd: list[str]) -> str:
    """A command as the page and the records show it: from the repository root, without
    the interpreter's path (``tune.py --network ...``)."""
    return " ".join(cmd[1:]).replace(REPO + os.sep, "")


def fresh_start(step: str, work_dir: str, work_root: str) -> None:
    """Remove what an earlier, unrecorded attempt at ``step`` left: its work dir (a resumed
    run would report only the resumed part's trials and time), and its memory when no
    earlier step fills it (``first``'s and ``second-alone``'s start empty)."""
    memory = STEPS[step][1]
    paths = [work_dir]
    if next(s for s, (_, m, _) in STEPS.items() if m == memory) == step:
        paths.append(os.path.join(work_root, memory))
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def tune_step(step: str, cmd: list[str], work_dir: str, work_root: str) -> dict[str, Any]:
    """Run one tuning step from a fresh work dir (:func:`fresh_start`) and record it."""
    fresh_start(step, work_dir, work_root)
    print("$", " ".join(cmd[1:]), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO)
    wall = time.perf_counter() - start
    with open(os.path.join(work_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    memory = report.get("memory") or {}
    return {
        "step": step, "network": report["network"], "work_dir": os.path.relpath(work_dir, REPO),
        "trials": report["trials"], "trials_run": report["trials_run"],
        "tuning_seconds": report["tuning_seconds"], "run_seconds": round(wall, 1),
        "tasks": len(report.get("tasks") or []), "known": memory.get("known", 0),
        "records_copied": memory.get("records_copied", 0), "budget": memory.get("budget"),
        "transfer": memory.get("transfer"), "preset": report.get("preset"),
        "target": report["target"], "machine": report["machine"], "runtime": report["runtime"],
        "code": report.get("code"), "command": shown(cmd),
    }


def side_by_side(work_dirs: dict[str, str], timing: dict[str, Any]) -> dict[str, Any]:
    """Build each work dir's network (the same weights) and time the builds side by side.

    Returns:
        ``latency_ms``, ``latency_windows_ms`` and ``rel_error`` (against the reference)
        per step, ``timing``, ``threads``, and where it ran.
    """
    from metatune.provenance import code_version, machine_info
    from tuner.app.export import build_target
    from tuner.engine.database import open_database
    from tuner.engine.evaluate import check_output, compile_network
    from tuner.engine.networks import load_network
    from tuner.engine.runtime import configure_tvm_threads, runtime_info
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering
    from tuner.engine.timing import interleaved
    from tuner.search.zero_shot import with_predictions

    reports = {}
    for step, work_dir in work_dirs.items():
        with open(os.path.join(work_dir, "report.json"), encoding="utf-8") as f:
            reports[step] = json.load(f)
    config = next(iter(reports.values()))["config"]
    threads = resolve_target(str(config.get("target") or "llvm"),
                             config.get("num_cores")).num_cores
    configure_tvm_threads(threads)
    shape = config.get("input_shape")
    network = load_network(config.get("network"), model_spec=config.get("model"),
                           input_shape=tuple(shape) if shape else None,
                           batch=int(config.get("batch") or 1),
                           fold_bn=bool(config.get("fold_bn", True)))
    lowering = Lowering(pack_weights=bool(config.get("pack_weights", True)),
                        layout=str(config.get("layout") or "NHWC"))
    x = network.example_input()
    reference = network.reference(x)
    timers, errors = {}, {}
    for step, work_dir in work_dirs.items():
        target, device_type = build_target(reports[step]["config"], work_dir)
        built = compile_network(network.relax_mod, target,
                                with_predictions(open_database(work_dir), work_dir),
                                device_type, lowering)
        errors[step] = check_output(built.run(x), reference, float("inf"))
        timers[step] = built.timer(x)
    print(f"timing {', '.join(timers)} side by side ({threads} threads)", flush=True)
    latency = interleaved(timers, timing["windows"], timing["min_window_ms"], timing["rounds"])
    return {
        "step": SIDE_BY_SIDE, "network": network.name,
        "latency_ms": {s: lat.median_ms for s, lat in latency.items()},
        "latency_windows_ms": {s: lat.runs_ms for s, lat in latency.items()},
        "rel_error": errors, "timing": {**timing, "order": "alternating", "warm_call": True},
        "threads": threads, "target": resolve_target("llvm").description,
        "machine": machine_info(), "runtime": runtime_info(threads), "code": code_version(),
    }


def load_records(runs: str, platform: str) -> dict[str, dict]:
    """The platform's records by step (those that exist)."""
    out = {}
    for step in [*STEPS, SIDE_BY_SIDE]:
        path = os.path.join(runs, platform, f"{step}.json")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                out[step] = json.load(f)
    return out


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def page(records: dict[str, dict], prov: dict) -> str:
    """The markdown page of one platform's records."""
    lines = ["# Tuning memory: a second network that shares shapes with a first", "",
             f"Command: `{prov['command']}`. Three `tune.py` runs at the same budget and "
             "settings (schedule transfer from the shipped datasets included); only the "
             "tuning memory differs ([docs/memory.md](../memory.md)). Records: "
             f"`{RUNS}/<platform>/`.", "",
             "| run | network | memory | trials measured / budget | tasks from the memory | "
             "tuning loop | tune.py end to end (evaluation off) |",
             "|---|---|---|---|---|---|---|"]
    for step, (_, memory, what) in STEPS.items():
        r = records.get(step)
        if r is None:
            lines.append(f"| {step} ({what}) | - | - | not run yet | - | - | - |")
            continue
        lines.append(f"| {step} ({what}) | {r['network']} | `{memory}` | {r['trials_run']} / "
                     f"{r['budget'] if r.get('budget') is not None else r['trials']} | "
                     f"{r['known']} of {r['tasks']} | {_s(r['tuning_seconds'])} | "
                     f"{_s(r['run_seconds'])} |")
    with_memory, alone = records.get("second-with-memory"), records.get("second-alone")
    if with_memory and alone:
        lines += ["", f"The second network after the first measured {with_memory['trials_run']}"
                  f" trials in {_s(with_memory['tuning_seconds'])} of tuning "
                  f"({with_memory['known']} of its {with_memory['tasks']} tasks from the "
                  f"memory); alone it measured {alone['trials_run']} in "
                  f"{_s(alone['tuning_seconds'])}."]
    sbs = records.get(SIDE_BY_SIDE)
    lines += ["", "## The two builds of the second network, side by side", ""]
    if sbs is None:
        lines.append("Not timed yet.")
    else:
        t = sbs["timing"]
        lines += [f"{sbs['network']}, built from each work dir's schedules in one process "
                  f"and timed in alternating rounds ({t['windows']} windows of at least "
                  f"{t['min_window_ms']} ms over {t['rounds']} rounds, {sbs['threads']} "
                  "threads each); error: relative max error against the reference.", "",
                  "| build | median ms | error |", "|---|---|---|"]
        for step, lat in sbs["latency_ms"].items():
            lines.append(f"| {step} | {lat:.2f} | {sbs['rel_error'][step]:.1e} |")
        lat = sbs["latency_ms"]
        if lat.get("second-with-memory") and lat.get("second-alone"):
            lines += ["", f"With the memory / alone: "
                      f"{lat['second-with-memory'] / lat['second-alone']:.2f}x."]
    runs = list(records.values())
    lines += ["", "## Provenance", "", *machine_lines(runs)]
    lines += [f"- `{r['step']}`: `{r['command']}`" for r in runs if r.get("command")]
    span = measured_span(runs)
    if span:
        lines.append(f"- measured {span[0]} to {span[1]}")
    lines.append("")
    return "\n".join(lines)


def write_page(records: dict[str, dict], out: str, prov: dict) -> None:
    """``out``.md and ``out``.json from the records."""
    doc = {"command": prov["command"], "date": prov["date"], "records": list(records.values())}
    write_results(out + ".json", out + ".md", doc, page(records, prov), rows_key="records")


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the process exit code."""
    from tuner.app.config import EvaluateConfig, TuneConfig
    from tuner.engine.platforms import platform_id
    from tuner.engine.targets import resolve_target

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--first", default=FIRST, help="the first network (name or module:callable)")
    p.add_argument("--second", default=SECOND, help="the second network")
    p.add_argument("--trials", type=int, default=TuneConfig.trials,
                   help=f"every run's budget (default: tune.py's, {TuneConfig.trials})")
    p.add_argument("--windows", type=int, default=EvaluateConfig.repeat)
    p.add_argument("--min-window-ms", type=float, default=EvaluateConfig.min_repeat_ms)
    p.add_argument("--rounds", type=int, default=EvaluateConfig.rounds)
    p.add_argument("--work-root", default=os.path.join(REPO, "work", "memory-reuse"))
    p.add_argument("--runs-dir", default=RUNS, help="where the records go, per platform")
    p.add_argument("--out", default=OUT, help="page and JSON path, without extension")
    p.add_argument("--report-only", action="store_true", help="only rewrite the page")
    p.add_argument("--dry-run", action="store_true", help="print the steps, run nothing")
    p.add_argument("overrides", nargs="*", help="tune.py config overrides (every run)")
    args = p.parse_args(argv)
    runs, out, work_root = in_repo(args.runs_dir), in_repo(args.out), in_repo(args.work_root)
    platform = platform_id(resolve_target("llvm").target)
    networks = {"first": args.first, "second": args.second}
    commands = {step: tune_command(step, networks, work_root, args.trials, args.overrides)
                for step in STEPS}
    if args.dry_run:
        for step, (cmd, _) in commands.items():
            print(f"{step}: {shown(cmd)}")
        print(f"{SIDE_BY_SIDE}: time {commands['second-with-memory'][1]} and "
              f"{commands['second-alone'][1]} in alternating rounds")
        return 0
    prov = provenance("bench.memory_reuse")
    prov["command"] = run_command(prov)
    if not args.report_only:
        os.makedirs(os.path.join(runs, platform), exist_ok=True)
        for step, (cmd, work_dir) in commands.items():
            recorded_run(os.path.join(runs, platform, f"{step}.json"), f"{step}, {platform}",
                         lambda s=step, c=cmd, w=work_dir: tune_step(s, c, w, work_root))
            write_page(load_records(runs, platform), out, prov)
        timing = {"windows": args.windows, "min_window_ms": args.min_window_ms,
                  "rounds": args.rounds}
        recorded_run(os.path.join(runs, platform, f"{SIDE_BY_SIDE}.json"),
                     f"{SIDE_BY_SIDE}, {platform}", lambda: side_by_side(
                         {s: commands[s][1] for s in ("second-with-memory", "second-alone")},
                         timing))
    write_page(load_records(runs, platform), out, prov)
    return 0


if __name__ == "__main__":
    sys.exit(main())
