"""The attribution's runs: the plan (seed, then task, then variant), one fresh worker
process per run, and the records each run leaves (resumable; a failed run is recorded
with its error and retried only on request)."""

from __future__ import annotations

import datetime
import glob
import json
import os
import signal
import subprocess
import sys
import traceback
from typing import NamedTuple

from bench.attribution.variants import Variant
from bench.common import REPO, write_json_atomic
from bench.frameworks.plan import run_name

#: The layout the tasks are extracted in: ``tune.py``'s default (``TuneConfig.layout``).
LAYOUT = "NHWC"
#: A worker stopped by Ctrl-C (the signal, or the exit status a shell gives it).
INTERRUPTED = (-signal.SIGINT, 128 + signal.SIGINT)


class Run(NamedTuple):
    """One planned run."""

    seed: int
    task: str
    variant: Variant


def plan(seeds: list[int], tasks: list[str], variants: list[Variant]) -> list[Run]:
    """Every run, seed by seed, then task by task, then variant by variant: a partial pass
    covers every variant on the first tasks, and a slow spell of the machine spreads
    across the variants rather than hitting one."""
    return [Run(s, t, v) for s in seeds for t in tasks for v in variants]


def record_path(runs_dir: str, trials: int, batch: int, run: Run) -> str:
    """Where one run's record goes:
    ``<runs_dir>/t<trials>-b<batch>/<task>-<variant>-<seed>.json``."""
    return os.path.join(runs_dir, f"t{trials}-b{batch}",
                        run_name(run.task, run.variant.name, run.seed))


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def failed_record(run: Run, trials: int, batch: int, error: str) -> dict:
    """The record of a run that failed: what it was, and its error."""
    from metatune.provenance import code_version

    return {"variant": run.variant.name, "part": run.variant.part, "task": run.task,
            "seed": run.seed, "trials_planned": trials, "batch": batch, "status": "failed",
            "error": error, "code": code_version(), "date": _now()}


def work(run: Run, trials: int, batch: int, out: str, overrides: list[str]) -> int:
    """One run in this process (the ``--worker`` mode): tune it, write its record to ``out``
    (a failure too, with its error), and return the exit status.

    Args:
        run: The run.
        trials: Its budget.
        batch: Trials per round.
        out: Where its record goes.
        overrides: Tune overrides for every run, after the variant's own.
    """
    from bench.common import tune_one_task
    from bench.machine_load import LoadMeter

    network, name = run.task.split("/", 1)
    extra = run.variant.tune_overrides() + list(overrides)
    try:
        with LoadMeter() as load:
            record = tune_one_task(network, name, run.variant.preset, run.seed, trials, batch,
                                   extra, layout=LAYOUT)
        record["machine_load"] = load.result
    except (Exception, SystemExit) as err:  # noqa: BLE001 - recorded, not retried blindly
        lines = traceback.format_exc().strip().splitlines()
        error = f"{type(err).__name__}: {err}".strip()
        write_json_atomic(out, failed_record(run, trials, batch, error + "\n"
                                             + "\n".join(lines[-12:])))
        print(f"{run.task} {run.variant.name} seed {run.seed} failed: {error}",
              file=sys.stderr, flush=True)
        return 1
    record.update({"variant": run.variant.name, "part": run.variant.part,
                   "overrides": run.variant.dotlist() + list(overrides),
                   "trials_planned": trials, "batch": batch, "status": "ok", "date": _now()})
    write_json_atomic(out, record)
    return 0


def read(path: str) -> dict | None:
    """The record at ``path`` (``None``: none yet)."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def spawn(cmd: list[str]) -> int:
    """Run one worker from the repository root, its output on this one's; its exit status."""
    return subprocess.run(cmd, check=False, cwd=REPO).returncode


class Progress(NamedTuple):
    """What :func:`run_all` did."""

    ran: int
    done_before: int
    failed: int
    skipped: dict[str, list[tuple[str, str]]]  #: variant -> its missing files and commands


def run_all(runs: list[Run], runs_dir: str, trials: int, batch: int, module: str,
            overrides: list[str], retry_failed: bool = False) -> Progress:
    """Run each planned run not yet recorded, each in a fresh ``python -m module --worker``
    process, its record written as it finishes. A recorded run is skipped (a failed one
    too, unless ``retry_failed``), and so is every run of a variant whose checkpoint is
    missing (printed once, with the command that makes it; nothing is recorded, so a rerun
    once it exists runs them).

    Raises:
        KeyboardInterrupt: A worker was interrupted (Ctrl-C): the pass stops, unrecorded.
    """
    ran = before = failed = 0
    skipped: dict[str, list[tuple[str, str]]] = {}
    for i, run in enumerate(runs, 1):
        label = f"[{i}/{len(runs)}] {run.task} {run.variant.name} seed {run.seed}"
        missing = run.variant.missing()
        if missing:
            if run.variant.name not in skipped:
                skipped[run.variant.name] = missing
                print(f"{label}: skipped, it needs " + "; ".join(
                    f"{path} (make it: {cmd})" for path, cmd in missing), flush=True)
            continue
        path = record_path(runs_dir, trials, batch, run)
        record = read(path)
        if record is not None and (record.get("status") != "failed" or not retry_failed):
            before += 1
            state = "failed before (--retry-failed reruns it)" if record.get(
                "status") == "failed" else "done before"
            print(f"{label}: {state}", flush=True)
            continue
        print(label, flush=True)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if record is not None:
            os.remove(path)  # a failed run retried: its new record replaces it
        cmd = [sys.executable, "-m", module, "--trials", str(trials), "--batch", str(batch),
               "--worker", run.task, run.variant.name, str(run.seed), path, *overrides]
        code = spawn(cmd)
        if code in INTERRUPTED:
            raise KeyboardInterrupt(f"{label}: interrupted; rerun the command to resume")
        if code != 0 and read(path) is None:
            write_json_atomic(path, failed_record(
                run, trials, batch, f"the worker exited with status {code} and wrote no "
                "record (killed, or out of memory?); its output is in the log above"))
        ran += 1
        failed += (read(path) or {}).get("status") == "failed"
    return Progress(ran, before, failed, skipped)


def load(runs_dir: str, batch: int) -> tuple[list[dict], list[dict]]:
    """Every record of rounds of ``batch`` under ``runs_dir``, of every budget: per task,
    variant and seed the finished run of the largest budget (a longer run's first trials
    stand for a shorter one's), and the failed runs that no finished run of at least their
    budget stands for.

    Returns:
        ``(finished, failed)``.
    """
    best: dict[tuple[str, str, int], dict] = {}
    failed = []
    for path in sorted(glob.glob(os.path.join(runs_dir, f"t*-b{batch}", "*.json"))):
        rec = read(path)
        key = (rec["task"], rec["variant"], rec["seed"])
        if rec.get("status") == "failed":
            failed.append(rec)
        elif key not in best or rec["trials_planned"] > best[key]["trials_planned"]:
            best[key] = rec
    return list(best.values()), [
        r for r in failed if best.get((r["task"], r["variant"], r["seed"]), {}).get(
            "trials_planned", 0) < r["trials_planned"]]
