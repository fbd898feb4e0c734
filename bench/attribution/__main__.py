"""What each part of MetaTune earns, in one table (issue 61).

Every variant (``--variants``; see ``bench/attribution/variants.py``) tunes the same
held-out network tasks (convolutions of alexnet, resnet-18 and squeezenet as ``tune.py``
extracts them, NHWC; in no checkpoint's training data) with the same seeds, budget and
batch, each run in a fresh process, runs ordered seed, then task, then variant. Each
run's record (curve, round timings, machine, threads, commit, checkpoint; a few KB) is
written as it finishes under ``--runs-dir`` (default
``docs/bench/runs/attribution/<platform>``); rerunning the command resumes, and a run
that failed is recorded with its error and rerun only with ``--retry-failed``. The page
(``docs/bench/attribution.md`` and ``.json``) sets each variant against xgb in the same
task and seed, after 16-512 trials and at xgb's wall time for them, and prices each part
switched on from xgb's side and off from the default.

Usage:
    python -m bench.attribution --quick                 # 1 task, 1 seed, 128 trials
    python -m bench.attribution                         # 3 tasks x 2 seeds; resumable
    python -m bench.attribution --trials 512            # the 512 column (its own runs)
    python -m bench.attribution --variants xgb default pool-512 pool-2048
    python -m bench.attribution --report-only           # the page from the records
"""

from __future__ import annotations

import argparse
import os
import sys

from bench.attribution.page import markdown
from bench.attribution.runs import LAYOUT, Run, load, plan, run_all, work
from bench.attribution.stats import part_rows, sentences, variant_rows
from bench.attribution.variants import BY_NAME, choose
from bench.common import (
    REPO,
    in_repo,
    machine_lines,
    measured_span,
    provenance,
    run_command,
    show_slow_steps,
    write_results,
)
from bench.frameworks.plan import FULL_TASKS, code_lines, source_lines

#: Three held-out tasks of three networks (of the comparison's six, vgg-16's slow one left out).
TASKS = [FULL_TASKS[0], FULL_TASKS[2], FULL_TASKS[4]]


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one task, one seed")
    p.add_argument("--title", help="the page's title (a lab A/B's question; default: the "
                                   "attribution page's)")
    p.add_argument("--tasks", nargs="+", help=f"network/task names (default: {TASKS})")
    p.add_argument("--seeds", type=int, nargs="+", help="default: 0 1 (--quick: 0)")
    p.add_argument("--variants", nargs="+",
                   help=f"default: every one but the levers; all: {', '.join(BY_NAME)}")
    p.add_argument("--trials", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--retry-failed", action="store_true",
                   help="rerun the runs recorded as failed")
    p.add_argument("--report-only", action="store_true",
                   help="write the page from the records; run nothing")
    p.add_argument("--platform", help="whose records (default: this machine's; another "
                                      "only with --report-only)")
    p.add_argument("--runs-dir", help="records (default docs/bench/runs/attribution/<platform>)")
    p.add_argument("--out", help="page prefix (default docs/bench/attribution, with --quick "
                                 "docs/bench/attribution-quick)")
    p.add_argument("--worker", nargs=4, metavar=("TASK", "VARIANT", "SEED", "OUT"),
                   help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="tune overrides for every run (after the "
                                                "variant's own)")
    args = p.parse_args(argv)
    args.tasks = args.tasks or (TASKS[:1] if args.quick else TASKS)
    args.seeds = args.seeds if args.seeds is not None else ([0] if args.quick else [0, 1])
    return args


def _place(args: argparse.Namespace) -> None:
    """The platform and the paths that default to it, absolute.

    Raises:
        SystemExit: ``--platform`` names another machine and runs would be made.
    """
    from bench.frameworks.plan import this_platform

    here = this_platform()
    args.platform = args.platform or here
    if args.platform != here and not args.report_only:
        raise SystemExit(f"--platform {args.platform}: this machine is {here}, and its runs "
                         "go to its own records; leave --platform out, or add --report-only")
    args.runs_dir = in_repo(args.runs_dir or os.path.join(
        "docs", "bench", "runs", "attribution", args.platform))
    args.out = in_repo(args.out or os.path.join(
        "docs", "bench", "attribution" + ("-quick" if args.quick else "")))


def document(args: argparse.Namespace, runs: list[Run], skipped: dict) -> dict:
    """The page's document from the records of the planned tasks, seeds and variants."""
    finished, failed = load(args.runs_dir, args.batch)
    planned = {(r.task, r.variant.name, r.seed) for r in runs}
    records = [r for r in finished if (r["task"], r["variant"], r["seed"]) in planned]
    done = sum(r["trials_planned"] >= args.trials for r in records)
    variants = list(dict.fromkeys(r.variant for r in runs))
    rows = variant_rows(records, variants, args.trials)
    parts = part_rows(records, args.trials)
    prov = provenance("bench.attribution")
    prov["command"] = run_command(prov)
    return {**prov, "measured": measured_span(records), "platform": args.platform,
            "machines": machine_lines(records), "code": code_lines(records),
            "trained_on": source_lines([{**r, "preset": r["variant"]} for r in records]),
            "layout": LAYOUT, "heldout": set(args.tasks) <= set(FULL_TASKS),
            "tasks": args.tasks, "seeds": args.seeds,
            "variants": [v.name for v in variants], "trials": args.trials,
            "batch": args.batch, "runs_dir": os.path.relpath(args.runs_dir, REPO),
            "runs_done": done, "runs_planned": len(runs), "skipped": skipped,
            "title": args.title,
            "runs_loaded": sum(bool((r.get("machine_load") or {}).get("loaded"))
                               for r in records),
            "runs_load_unknown": sum(r.get("machine_load") is None for r in records),
            "failed": [f for f in failed
                       if (f["task"], f["variant"], f["seed"]) in planned],
            "rows": rows, "parts": parts, "sentences": sentences(rows, parts, args.trials)}


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    show_slow_steps()
    if args.worker:
        task, name, seed, out = args.worker
        return work(Run(int(seed), task, BY_NAME[name]), args.trials, args.batch, out,
                    args.overrides)
    _place(args)
    variants = choose(args.variants)
    runs = plan(args.seeds, args.tasks, variants)
    skipped = {v.name: v.missing() for v in variants if v.missing()}
    if not args.report_only:
        progress = run_all(runs, args.runs_dir, args.trials, args.batch, "bench.attribution",
                           args.overrides, args.retry_failed)
        print(f"{progress.ran} runs made ({progress.failed} failed), "
              f"{progress.done_before} recorded before", flush=True)
    doc = document(args, runs, skipped)
    write_results(args.out + ".json", args.out + ".md", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
