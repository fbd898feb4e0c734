"""Tuning speed on whole networks: the default (meta-BO-T) against MetaSchedule's own
(preset ``xgb``), along a ladder of budgets.

For each network, preset and seed, one work dir is tuned up a ladder of budgets (128, 256,
512, 1024, 2048 trials by default): each rung reruns ``tune.py --trials B`` on the same
work dir (it resumes: the database counts), exports that rung's build (``export.py
--work-dir W --out W/stage-B``, its output checked against PyTorch) and records the rung
(trials, the run's tuning wall time, the cumulative tuning time over the rungs so far,
where it ran) in ``docs/bench/runs/tuning-speed/<platform>/<network>-<preset>-s<seed>.json``
as soon as it finishes. A rung whose record and artifact exist is not run again: the
command resumes. The order is budget-major (every network, seed and preset at 128 trials,
then 256, ...), seeds in order within a budget, the presets alternating, so that a partial
run covers every network at the low budgets first. ``--max-minutes`` stops between rungs.
No run reads or writes the machine's tuning memory: presets ``xgb`` and ``default`` run with
``tune.py --no-memory``; preset ``first-run`` (opt in: ``--presets xgb default first-run``) is
the default as a user's first ``tune.py`` run gets it, the tuning memory on but empty and
schedule transfer from the shipped datasets, with a memory of its own in its work dir
(``memory.path=<work dir>/memory``), so that no run reads another's records.

Then (and with ``--time``, without tuning), for each network whose set of rung builds
differs from the one it was last timed with, one process loads every rung artifact of the
network (all presets and seeds) and PyTorch eager, and times them side by side in
alternating rounds (:func:`tuner.engine.timing.interleaved`); the medians go to
``<network>-timing.json`` beside the rung records. The page (``docs/bench/tuning-speed.md``
and ``.json``) is written from the records (:mod:`bench.tuning_speed_page`).

Examples:
    python -m bench.tuning_speed --budgets 128          # the first phase
    python -m bench.tuning_speed                        # the whole ladder (resumes)
    python -m bench.tuning_speed --presets first-run --budgets 128   # as a first run
    python -m bench.tuning_speed --time                 # time what is exported, no tuning
    python -m bench.tuning_speed --report-only          # rewrite the page from the records
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from bench.common import (
    BENCH_ROUNDS,
    BENCH_WINDOWS,
    REPO,
    in_repo,
    provenance,
    repo_relative,
    run_command,
)
from bench.common import write_json_atomic as write_record
from bench.machine_load import LoadMeter
from bench.tuning_speed_records import FIRST_RUN, read_json, record_path, slug

#: The networks, as ``tune.py`` takes them: a built-in name (``--network``) or a
#: ``module:callable`` (``--model``). The last two were named on the page before any
#: measurement on them.
NETWORKS = ("resnet-18", "mobilenet-v2", "torchvision.models:mobilenet_v3_small",
            "torchvision.models:regnet_y_400mf")
#: The presets compared: MetaSchedule's own, and tune.py's default (no ``--preset``).
PRESETS = ("xgb", "default")
# FIRST_RUN (``first-run``) runs only when named (``--presets first-run``): tune.py's
# default as a user's first run gets it, the tuning memory on and empty, schedule transfer
# from the shipped datasets; its memory is its work dir's own (:func:`memory_dir`).
SEEDS = (0, 1, 2)
BUDGETS = (128, 256, 512, 1024, 2048)
#: Arguments every ``tune.py`` run of this benchmark gets but :data:`FIRST_RUN`'s: the
#: machine-wide tuning memory is neither read nor written by a benchmark run
#: (:func:`check_tune_args` checks, before anything is tuned, that ``tune.py`` takes them
#: and that none of :data:`REQUIRED_WHEN_OFFERED` is left out).
TUNE_ARGS: tuple[str, ...] = ("--no-memory",)
#: ``tune.py`` flags that TUNE_ARGS must hold whenever ``tune.py --help`` offers them.
REQUIRED_WHEN_OFFERED = ("--no-memory",)
#: Config keys a user's overrides may not set: each preset's memory is this benchmark's.
MEMORY_KEYS = ("memory.enabled", "memory.path")
RUNS = "docs/bench/runs/tuning-speed"
OUT = "docs/bench/tuning-speed"


class Rung(NamedTuple):
    """One step of the ladder: tune ``network`` with ``preset`` and ``seed`` to ``budget``.

    ``variant`` is ``None`` for a preset ``tune.py`` knows; for a named variant of the
    default (a lab A/B, ``experiments/variant_ladder.py``), the ``tune.py`` overrides that
    make it, and ``preset`` is its name.
    """

    network: str
    preset: str
    seed: int
    budget: int
    variant: tuple[str, ...] | None = None


def plan(networks: list[str], presets: list[str], seeds: list[int],
         budgets: list[int], variants: Mapping[str, Sequence[str]] | None = None) -> list[Rung]:
    """The ladder's rungs in the order they run: budget-major, then seed, then network,
    the presets' order reversed from one (seed, network) to the next (A B, B A, ...), so
    that neither preset always tunes first after the other. ``variants`` maps a preset
    name that is a variant of the default to its ``tune.py`` overrides."""
    variants = variants or {}
    out, turn = [], 0
    for budget in sorted(set(budgets)):
        for seed in seeds:
            for network in networks:
                order = presets if turn % 2 == 0 else presets[::-1]
                turn += 1
                out += [Rung(network, p, seed, budget,
                             tuple(variants[p]) if p in variants else None) for p in order]
    return out


def work_dir(work_root: str, rung: Rung) -> str:
    """The work dir of a rung's network, preset and seed (shared by its rungs)."""
    return os.path.join(work_root, f"{slug(rung.network)}-{rung.preset}-s{rung.seed}")


def memory_dir(work: str) -> str:
    """The private tuning memory of a :data:`FIRST_RUN` work dir (empty before its first
    rung; later rungs find only the work dir's own records in it)."""
    return os.path.join(work, "memory")


def artifact_dir(work: str, budget: int) -> str:
    """Where a rung's build is exported."""
    return os.path.join(work, f"stage-{budget}")


def rung_done(record: dict | None, budget: int) -> bool:
    """Whether the record has the rung and its exported artifact still exists."""
    for r in (record or {}).get("rungs", []):
        if r["budget"] == budget:
            return os.path.exists(os.path.join(in_repo(r["artifact"]), "manifest.json"))
    return False


def check_tune_args(presets: list[str] | tuple[str, ...] = PRESETS,
                    overrides: list[str] | tuple[str, ...] = (),
                    variants: Mapping[str, Sequence[str]] | None = None) -> None:
    """Refuse to tune unless every preset's ``tune.py`` arguments (:func:`tune_args`) keep
    the machine's tuning memory out: ``tune.py`` takes every flag of them; those of every
    preset but :data:`FIRST_RUN` hold every flag of :data:`REQUIRED_WHEN_OFFERED` that
    ``tune.py`` offers (``--no-memory``) and leave the memory off; :data:`FIRST_RUN`'s
    leave it on at the work dir's own :func:`memory_dir`, and nowhere else (as ``tune.py``
    reads its arguments into its configuration); no override sets a key of
    :data:`MEMORY_KEYS`.

    Raises:
        SystemExit: A flag ``tune.py`` lacks, one missing, or a memory another run shares.
    """
    text = subprocess.run([sys.executable, os.path.join(REPO, "tune.py"), "--help"],
                          capture_output=True, text=True, check=True, cwd=REPO).stdout
    flags = {w.strip("[],") for w in text.split() if w.startswith(("--", "[--"))}
    mine = [o for o in overrides if o.split("=", 1)[0] in MEMORY_KEYS]
    if mine:
        raise SystemExit(f"override {', '.join(mine)}: the tuning memory of each preset is "
                         "bench/tuning_speed.py's (none, or the work dir's own for "
                         f"{FIRST_RUN}); leave it out")
    work = os.path.join(REPO, "work", "tuning-speed", "check")
    args = {r.preset: tune_args(r, list(overrides), work)
            for r in plan(["alexnet"], list(presets), [0], [1], variants)}
    for preset, a in args.items():
        unknown = [f for f in a if f.startswith("--") and f not in flags]
        if unknown:
            raise SystemExit(f"tune.py does not take {', '.join(unknown)} (bench/"
                             "tuning_speed.py's TUNE_ARGS): update tune.py, or TUNE_ARGS")
        missing = [f for f in REQUIRED_WHEN_OFFERED if f in flags and f not in a]
        if preset != FIRST_RUN and missing:
            raise SystemExit(f"tune.py offers {', '.join(missing)} but bench/tuning_speed.py's "
                             "TUNE_ARGS does not pass it: a benchmark run must not use the "
                             "tuning memory; add it to TUNE_ARGS")
    for (preset, a), (enabled, path) in zip(args.items(), _memory_of(list(args.values())),
                                            strict=True):
        want = [True, os.path.abspath(memory_dir(work))] if preset == FIRST_RUN else [False]
        if [enabled, path][:len(want)] != want:
            raise SystemExit(
                f"preset {preset}: tune.py {' '.join(a)} tunes with the memory "
                f"{'on at ' + str(path) if enabled else 'off'}: " + (
                    f"preset {FIRST_RUN} must tune with the memory on, at its work dir's own "
                    "memory.path" if preset == FIRST_RUN else
                    "a benchmark run must not use the tuning memory") +
                "; update bench/tuning_speed.py's tune_args")


#: Run by :func:`_memory_of` in a ``tune.py`` of its own (nothing imports an entry point).
_READ_MEMORY = """\
import json, sys, tune
from tuner.app.config import load_tune_config
out = []
for args in json.loads(sys.argv[1]):
    cfg = load_tune_config(*tune.parse_args(["--network", "alexnet", *args]))
    out.append([cfg.memory.enabled, cfg.memory.path])
print(json.dumps(out))
"""


def _memory_of(arg_lists: list[list[str]]) -> list[tuple[bool, str | None]]:
    """``(memory.enabled, memory.path)`` as ``tune.py`` reads each of ``arg_lists`` into its
    configuration (one process, which loads each configuration and tunes nothing).

    Raises:
        SystemExit: ``tune.py`` refuses one of them.
    """
    done = subprocess.run([sys.executable, "-c", _READ_MEMORY, json.dumps(arg_lists)],
                          capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"tune.py refuses the benchmark's arguments {arg_lists}: {why}")
    return [(bool(e), p) for e, p in json.loads(done.stdout.strip().splitlines()[-1])]


def tune_args(rung: Rung, overrides: list[str], work: str) -> list[str]:
    """``tune.py``'s arguments besides the network, budget and work dir (``work``): the
    preset (none for the default, :data:`FIRST_RUN` and a variant), a variant's overrides,
    then ``overrides``, then :data:`TUNE_ARGS`, or for :data:`FIRST_RUN` the work dir's own
    memory."""
    plain = rung.preset in ("default", FIRST_RUN) or rung.variant is not None
    preset = [] if plain else [f"preset={rung.preset}"]
    memory = ([f"memory.path={memory_dir(work)}"] if rung.preset == FIRST_RUN
              else list(TUNE_ARGS))
    return [f"seed={rung.seed}", *preset, *(rung.variant or ()), *overrides, *memory]


def export_rung(work: str, budget: int) -> tuple[str, dict, float]:
    """Export the work dir's build as it is now (``export.py``, output checked) to the
    rung's artifact directory: ``(directory, manifest, seconds)``."""
    out = artifact_dir(work, budget)
    start = time.perf_counter()
    subprocess.run([sys.executable, os.path.join(REPO, "export.py"), "--work-dir", work,
                    "--out", out, "--overwrite"], check=True, cwd=REPO)
    return out, read_json(os.path.join(out, "manifest.json")) or {}, round(
        time.perf_counter() - start, 2)


def rung_entry(budget: int, report: dict, before: list[dict], process_seconds: float,
               command: str) -> dict:
    """A rung's entry in its record, from the run's ``report.json`` and the rungs below."""
    previous = before[-1]["trials_total"] if before else 0
    trials_before = report["trials_total"] - report["trials_run"]
    cumulative = sum(r["tuning_seconds"] for r in before) + report["tuning_seconds"]
    tasks = report.get("tasks") or []
    return {
        "budget": budget, "trials_total": report["trials_total"],
        "trials_run": report["trials_run"],
        # measured by an interrupted run, whose tuning time no report holds
        "untimed_trials": max(0, trials_before - previous),
        "tuning_seconds": report["tuning_seconds"],
        "cumulative_tuning_seconds": round(cumulative, 2),
        "predict_seconds": report.get("predict_seconds"),
        "process_seconds": round(process_seconds, 2),
        "preset_name": report.get("preset"), "failures": report.get("failures"),
        "tasks": {k: sum(t.get("schedule") == k for t in tasks)
                  for k in ("measured", "predicted", "default")},
        "target": report["target"], "machine": report["machine"],
        "runtime": report["runtime"], "code": report.get("code"),
        "date": report["machine"].get("date"), "command": command,
        # the tuning memory's part of the report (first-run's: its transfer), when on
        **({"memory": report["memory"]} if report.get("memory") else {}),
    }


def run_rung(rung: Rung, work_root: str, runs: str, platform: str, overrides: list[str],
             command: str) -> dict:
    """Tune the rung's work dir to its budget, export the build, and add the rung to its
    record (written whole at once). A rung recorded whose build is gone (and no rung above
    it: the database is still where the rung left it) is only exported again.

    Returns:
        The rung's entry in the record.
    """
    from bench.runtimes import tune_work_dir

    path = record_path(runs, platform, rung.network, rung.preset, rung.seed)
    record = read_json(path) or {"network": rung.network, "preset": rung.preset,
                                 "seed": rung.seed, "platform": platform,
                                 "work_dir": repo_relative(work_dir(work_root, rung)),
                                 "rungs": []}
    work = in_repo(record["work_dir"])
    kept = next((r for r in record["rungs"] if r["budget"] == rung.budget), None)
    if kept is None:
        start = time.perf_counter()
        with LoadMeter() as load:
            report = tune_work_dir(rung.network, rung.budget, work,
                                   tune_args(rung, overrides, work))
        kept = rung_entry(rung.budget, report, [r for r in record["rungs"]
                                                if r["budget"] < rung.budget],
                          time.perf_counter() - start, command)
        kept["machine_load"] = load.result
    out, manifest, seconds = export_rung(work, rung.budget)
    entry = {**kept, "artifact": repo_relative(out), "export_seconds": seconds,
             "check_error": manifest.get("check_error")}
    record["rungs"] = sorted([*[r for r in record["rungs"] if r["budget"] != rung.budget],
                              entry], key=lambda r: r["budget"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_record(path, record)
    return entry


def run_ladder(rungs: list[Rung], work_root: str, runs: str, platform: str,
               overrides: list[str], command: str, max_minutes: float | None) -> int:
    """Run every rung not yet done, in order, until ``max_minutes`` have passed (checked
    between rungs).

    Returns:
        How many rungs ran.
    """
    ran = 0
    deadline = None if max_minutes is None else time.monotonic() + 60 * max_minutes
    for i, rung in enumerate(rungs):
        record = read_json(record_path(runs, platform, rung.network, rung.preset, rung.seed))
        if rung_done(record, rung.budget):
            continue
        past = [r["budget"] for r in (record or {}).get("rungs", []) if r["budget"] > rung.budget]
        if past:
            print(f"skipped {rung}: its work dir is already tuned past it ({max(past)} "
                  "trials); a rung can only be made on the way up", flush=True)
            continue
        if deadline is not None and time.monotonic() > deadline:
            print(f"--max-minutes {max_minutes} reached: stopped before rung {i + 1} of "
                  f"{len(rungs)}; rerun the same command to go on", flush=True)
            break
        print(f"rung {i + 1}/{len(rungs)}: {rung.network}, {rung.preset}, seed {rung.seed}, "
              f"{rung.budget} trials", flush=True)
        run_rung(rung, work_root, runs, platform, overrides, command)
        ran += 1
    return ran


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from tuner.app.config import EvaluateConfig

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--networks", nargs="+", default=list(NETWORKS))
    p.add_argument("--presets", nargs="+", default=list(PRESETS),
                   help=f"xgb | default | {FIRST_RUN} | any tune.py preset (default: xgb "
                   "default)")
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    p.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    p.add_argument("--max-minutes", type=float, help="start no rung after this long")
    p.add_argument("--time", action="store_true",
                   help="no tuning: time the networks whose set of artifacts changed")
    p.add_argument("--retime", action="store_true",
                   help="time every network again, its artifacts changed or not")
    p.add_argument("--windows", type=int, default=BENCH_WINDOWS,
                   help="timing windows per build (default: bench.common.BENCH_WINDOWS)")
    p.add_argument("--min-window-ms", type=float, default=EvaluateConfig.min_repeat_ms)
    p.add_argument("--quiet-wait", type=float, default=10.0,
                   help="minutes to wait, before timing a network, for other processes to "
                        "leave the cores (then timed anyway, marked as under load)")
    p.add_argument("--rounds", type=int, default=BENCH_ROUNDS)
    p.add_argument("--work-root", help="work dirs (default work/tuning-speed/<platform>)")
    p.add_argument("--runs-dir", default=RUNS, help="where the records go, per platform")
    p.add_argument("--out", default=OUT, help="page and JSON path, without extension")
    p.add_argument("--report-only", action="store_true", help="only rewrite the page")
    p.add_argument("--platform", help="the records' platform (default: this machine's, "
                   "e.g. llvm-znver4)")
    p.add_argument("overrides", nargs="*", help="more tune.py config overrides")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the process exit code."""
    from bench.frameworks.plan import this_platform
    from bench.tuning_speed_page import write_page
    from bench.tuning_speed_timing import time_networks

    args = _parse(argv)
    runs, out = in_repo(args.runs_dir), in_repo(args.out)
    prov = provenance("bench.tuning_speed")
    prov["command"] = run_command(prov)
    platform = args.platform or this_platform()
    if not args.report_only:
        timing = {"windows": args.windows, "min_window_ms": args.min_window_ms,
                  "rounds": args.rounds, "quiet_wait_minutes": args.quiet_wait}
        if not args.time:
            check_tune_args(args.presets, args.overrides)
            work_root = in_repo(args.work_root or os.path.join("work", "tuning-speed",
                                                               platform))
            rungs = plan(args.networks, args.presets, args.seeds, args.budgets)
            run_ladder(rungs, work_root, runs, platform, args.overrides, prov["command"],
                       args.max_minutes)
        # every network whose set of artifacts differs from its timing's (this run's new
        # rungs, or an earlier run's that stopped before timing them)
        time_networks(args.networks, runs, platform, timing, prov["command"],
                      force=args.retime)
    write_page(runs, out, prov, args.networks, platform)
    return 0


if __name__ == "__main__":
    sys.exit(main())
