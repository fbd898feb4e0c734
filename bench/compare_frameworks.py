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

Records are kept per platform (``llvm-<cpu>``, as the datasets are): latencies compare
only within one machine, and the machines these runs get differ from day to day. Each
run's record (curve, per-round accuracy and timings, the CPU, target and thread counts; a
few KB) is written as it finishes to ``--runs-dir`` (committed; by default
``docs/bench/runs/frameworks/<platform>``), and each network run's ``report.json`` is copied
there too; the networks' tuning work dirs (databases) live under ``--work-root``. The page
is ``docs/bench/frameworks-v2.md``. A group (one task and seed, every preset) is
measured on one machine, and every comparison with xgb is paired within its group, so a
group that another platform has finished is read from its records rather than run again,
and the page pools every platform's groups. Rerun the same command to resume;
``--report-only`` writes the page from the runs done so far (the page says how many of the
planned runs it holds; ``--platform`` names another machine's). Runs go seed by seed, so
that a partial run covers every task.

The pieces live in :mod:`bench.frameworks`: the run plan (``plan``), the statistics
(``stats``), the markdown page (``page``) and the figures (``plots``).

Usage:
    python -m bench.compare_frameworks --quick          # about 15 minutes
    python -m bench.compare_frameworks                  # a few hours; resumable
    python -m bench.compare_frameworks --networks alexnet resnet-18 squeezenet vgg-16 \
        --network-rounds 3                              # and the networks end to end
    python -m bench.retime_networks --network alexnet   # one group side by side, by hand

A network group's runs follow one another for an hour or more, each timing its own build
at its end; once a group is complete, ``bench.retime_networks`` times its builds again
together, in one process (run by this script; by hand for a group tuned before), and the
page shows those latencies too.
"""

from __future__ import annotations

import argparse
import datetime
import os

from bench.common import (
    REPO,
    in_repo,
    machine_lines,
    provenance,
    show_slow_steps,
    write_json_atomic,
    write_results,
)
from bench.frameworks.page import markdown
from bench.frameworks.plan import (
    FULL_TASKS,
    PRESETS,
    QUICK_TASKS,
    code_lines,
    network_budget,
    network_sources,
    retime_groups,
    run_tasks,
    side_by_side,
    source_lines,
    tune_networks,
)
from bench.frameworks.plots import plot, plot_accuracy, plot_networks
from bench.frameworks.stats import (
    complete_groups,
    early_accuracy,
    headlines,
    network_group,
    network_rows,
    overall,
    summarize,
)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one task, 2 seeds, 64 trials")
    p.add_argument("--tasks", nargs="+", help="network/task names (default: see --quick)")
    p.add_argument("--no-tasks", action="store_true",
                   help="tune no single task, only the --networks end to end")
    p.add_argument("--presets", nargs="+", default=PRESETS)
    p.add_argument("--seeds", type=int, nargs="+")
    p.add_argument("--trials", type=int)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--networks", nargs="*", default=[],
                   help="also tune these whole networks with every preset (end to end)")
    p.add_argument("--network-trials", type=int, default=512)
    p.add_argument("--network-rounds", type=int,
                   help="the network runs' budget as rounds of every task instead of "
                        "--network-trials (tune.py --rounds-per-task)")
    p.add_argument("--network-seeds", type=int, nargs="+",
                   help="seeds of the network runs (default: the first of --seeds)")
    p.add_argument("--platform",
                   help="the platform whose runs dir new runs go to, e.g. llvm-icelake-server "
                        "(default: this machine's; another only with --report-only)")
    p.add_argument("--runs-dir",
                   help="where each finished run's record goes (small JSON; committed; "
                        "default docs/bench/runs/frameworks/<platform>)")
    p.add_argument("--work-root",
                   help="the networks' tuning work dirs (databases, logs; default "
                        "work/bench/frameworks/<platform>)")
    p.add_argument("--report-only", action="store_true",
                   help="write the page from the runs done so far; run nothing")
    p.add_argument("--out", help="page prefix (default: docs/bench/frameworks-v2, with "
                                 "--quick docs/bench/frameworks-v2-quick)")
    p.add_argument("--worker", nargs=4, metavar=("TASK", "PRESET", "SEED", "OUT"),
                   help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="tune config overrides for every run")
    args = p.parse_args()
    if args.no_tasks and not args.networks:
        p.error("--no-tasks leaves nothing to run: name the networks to tune end to end "
                "with --networks, e.g. --networks alexnet resnet-18")
    if args.no_tasks and args.tasks:
        p.error("--no-tasks and --tasks contradict each other: drop one")
    args.tasks = [] if args.no_tasks else args.tasks or (QUICK_TASKS if args.quick else FULL_TASKS)
    args.seeds = args.seeds or ([0, 1] if args.quick else [0, 1, 2])
    args.network_seeds = args.network_seeds or args.seeds[:1]
    args.trials = args.trials or (64 if args.quick else 256)
    return args


def _place(args: argparse.Namespace) -> None:
    """Fill in the platform, the paths that default to it and the other platforms' runs
    dirs whose finished groups count (``pool_dirs``); refuse to write runs measured here
    into another platform's records. Every path is made absolute, relative ones taken from
    the repository root (:func:`bench.common.in_repo`).

    Raises:
        SystemExit: ``--platform`` names another platform than this machine's and runs
            would be made (not with ``--report-only``).
    """
    from bench.frameworks.plan import this_platform

    here = this_platform()
    args.platform = args.platform or here
    if args.platform != here and not args.report_only:
        raise SystemExit(f"--platform {args.platform}: this machine is {here}, and runs "
                         "measured here go to its own records; leave --platform out (the "
                         "groups other platforms finished are read anyway), or add "
                         "--report-only to only write the page")
    pool = os.path.join(REPO, "docs", "bench", "runs", "frameworks")
    # groups (task, seed) finished on other platforms count; not with an explicit --runs-dir
    args.pool_dirs = [] if args.runs_dir else sorted(
        os.path.join(pool, d) for d in (os.listdir(pool) if os.path.isdir(pool) else [])
        if d != args.platform and os.path.isdir(os.path.join(pool, d)))
    args.runs_dir = in_repo(args.runs_dir or os.path.join(pool, args.platform))
    args.work_root = in_repo(args.work_root or os.path.join("work", "bench", "frameworks",
                                                            args.platform))
    args.out = in_repo(args.out or os.path.join(
        "docs", "bench", "frameworks-v2" + ("-quick" if args.quick else "")))


def _relative(path: str) -> str:
    """A path written into the page's JSON: relative to the repository root."""
    return os.path.relpath(path, REPO)


def main() -> None:
    args = _parse()
    show_slow_steps()
    if args.worker:
        from bench.common import tune_one_task

        task, preset, seed, out = args.worker
        network, name = task.split("/", 1)
        run = tune_one_task(network, name, preset, int(seed), args.trials, args.batch,
                            args.overrides)
        run["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        write_json_atomic(out, run)
        return
    _place(args)
    measured, planned = run_tasks(args, "bench.compare_frameworks")
    runs, partial = complete_groups(measured, args.presets)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    summary = summarize(runs, args.presets, args.trials, args.batch)
    early = early_accuracy(summary, args.presets)
    finished = tune_networks(args) if args.networks else []
    if args.networks and not args.report_only:
        retime_groups(args)
    reports, partial_networks = complete_groups(finished, args.presets, network_group)
    networks = network_rows(reports)
    prov = provenance("bench.compare_frameworks")
    timed_together = side_by_side(args) if args.networks else []
    # The page's command is the one that measures (and resumes); --report-only only rewrites it.
    prov["command"] = prov["command"].replace(" --report-only", "")
    dates = sorted(r["date"] for r in measured if r.get("date"))
    doc = {**prov, "measured": [dates[0], dates[-1]] if dates else None,
           "platform": args.platform, "machines": machine_lines(
               measured + finished, several="- **several machines**: latencies compare only "
               "within one machine; every ratio is taken within one group"),
           "trained_on": source_lines(measured + [network_sources(r) for r in finished]),
           "code": code_lines(measured + finished),
           "tasks": args.tasks, "presets": args.presets, "seeds": args.seeds,
           "trials": args.trials, "batch": args.batch,
           "runs_done": len(measured), "runs_planned": planned,
           "partial_groups": partial + partial_networks,
           "overall": overall(summary, args.presets), "early_accuracy": early,
           "headlines": headlines(summary, networks, timed_together),
           "summary": summary,
           "png": {task: _relative(p) for task, p in plot(summary, args.out).items()},
           "png_accuracy": _relative(plot_accuracy(early, args.out)) if early else None,
           "networks": networks,
           "png_networks": _relative(plot_networks(networks, args.out)) if networks else None,
           "side_by_side": timed_together,
           "network_runs_done": len(finished), "network_seeds": args.network_seeds,
           "network_budget": network_budget(args).words if args.networks else None,
           "networks_planned": len(args.networks) * len(args.presets) * len(args.network_seeds)}
    write_results(args.out + ".json", args.out + ".md", doc, markdown(doc))


if __name__ == "__main__":
    main()
