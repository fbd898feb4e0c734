# Last ran on commit 546b5b0
"""Two tune settings on a whole network, each build timed beside the other's.

``cold_start.py`` compares settings task by task; what a user gets is the network. This
script tunes the network once per configuration and seed (``tune.py`` in a fresh process,
one work dir each), then times every build again, alternating configurations, each
evaluation in its own process beside PyTorch eager (``tune.py`` again on the finished work
dir: its budget is met, so it only compiles and times). A build's latency is read as its
ratio to the PyTorch eager latency timed in the same process, so the machine's drift
between evaluations cancels; the configurations are compared by the geometric mean over
seeds and evaluations of that ratio, the second against the first.

    python -m experiments.network_ab --network alexnet --rounds-per-task 1 --seeds 0 1 2 \\
        --configs 'default=' 'corrected=metatune.compiled_correction=true'

Resumable: a tuning run whose ``report.json`` shows its budget met is not run again, and
the evaluations already recorded in ``--runs-dir`` are kept.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shlex
import statistics
import subprocess
import sys

from bench.common import REPO, named_overrides, provenance, write_results

logger = logging.getLogger("network_ab")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--network", required=True)
    p.add_argument("--configs", nargs=2, required=True, metavar="NAME=OVERRIDES",
                   help="two configurations, NAME=space-separated tune.py dotlist overrides "
                        "(the first is the baseline)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--rounds-per-task", type=int, default=1)
    p.add_argument("--trials-per-round", type=int, default=16)
    p.add_argument("--evaluations", type=int, default=2,
                   help="times each build is timed again (alternating configurations)")
    p.add_argument("--work-root", default="work/network-ab")
    p.add_argument("--runs-dir", required=True, help="where each evaluation's record goes")
    p.add_argument("--out", required=True, help="page prefix (.md and .json)")
    return p.parse_args(argv)


def _configs(specs: list[str]) -> list[tuple[str, list[str]]]:
    return named_overrides(specs, "--configs")


def _tune(args, name: str, overrides: list[str], seed: int, work: str,
          trials: int | None = None) -> dict:
    """Run ``tune.py`` on ``work`` and return its report: with ``trials`` None, tune the
    budget in rounds of every task, then time the build; else with that budget in trials,
    the database's own count after tuning, so that nothing is tuned and the same build is
    timed again (a budget in rounds would tune the rounds some tasks' spaces left short)."""
    budget = (["--rounds-per-task", str(args.rounds_per_task)] if trials is None
              else ["--trials", str(trials)])
    cmd = [sys.executable, os.path.join(REPO, "tune.py"), "--network", args.network,
           "--work-dir", work, *budget, "--trials-per-round", str(args.trials_per_round),
           "--seed", str(seed), "progress=false", "tensorboard=false", *overrides]
    logger.info("%s seed %d: %s", name, seed, shlex.join(cmd[1:]))
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    with open(os.path.join(work, "report.json"), encoding="utf-8") as f:
        return json.load(f)


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    configs = _configs(args.configs)
    os.makedirs(args.runs_dir, exist_ok=True)

    def work_dir(name: str, seed: int) -> str:
        return os.path.join(args.work_root, args.network, f"{name.replace(' ', '_')}-s{seed}")

    # tune: each (configuration, seed) once; the first evaluation is the tuning run's own
    for seed in args.seeds:
        for name, overrides in configs:
            path = os.path.join(args.runs_dir, f"{name.replace(' ', '_')}-s{seed}-e0.json")
            if os.path.exists(path):
                continue
            report = _tune(args, name, overrides, seed, work_dir(name, seed))
            _record(path, name, seed, 0, report)
    # evaluate again, alternating the configurations' order from one pass to the next
    for e in range(1, args.evaluations + 1):
        for seed in args.seeds:
            for name, overrides in (configs if (e + seed) % 2 else configs[::-1]):
                stem = os.path.join(args.runs_dir, f"{name.replace(' ', '_')}-s{seed}")
                if os.path.exists(f"{stem}-e{e}.json"):
                    continue
                with open(f"{stem}-e0.json", encoding="utf-8") as f:
                    trials = json.load(f)["trials_total"]
                _record(f"{stem}-e{e}.json", name, seed, e,
                        _tune(args, name, overrides, seed, work_dir(name, seed), trials))
    return _summarize(args, configs)


def _record(path: str, name: str, seed: int, evaluation: int, report: dict) -> None:
    lat = report.get("latency_ms") or {}
    if evaluation and report.get("trials_run"):
        raise SystemExit(f"{report.get('work_dir')}: the evaluation run tuned "
                         f"{report['trials_run']} more trials: its build is not the one the "
                         "tuning run timed; start that work dir again")
    if not lat.get("tuned") or not lat.get("torch"):
        raise SystemExit(f"{report.get('work_dir')}: the report has no tuned or PyTorch "
                         "latency (evaluate.enabled=false?)")
    rec = {"config": name, "seed": seed, "evaluation": evaluation, "tuned_ms": lat["tuned"],
           "torch_ms": lat["torch"], "untuned_ms": lat.get("untuned"),
           "ratio": lat["tuned"] / lat["torch"], "trials_run": report.get("trials_run"),
           "trials_total": report.get("trials_total"),
           "tuning_seconds": report.get("tuning_seconds"), "machine": report.get("machine"),
           "runtime": report.get("runtime"), "target": report.get("target"),
           "work_dir": report.get("work_dir"), "check_error": report.get("check_error")}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1)


def _summarize(args, configs) -> dict:
    recs = []
    for name in os.listdir(args.runs_dir):
        if name.endswith(".json"):
            with open(os.path.join(args.runs_dir, name), encoding="utf-8") as f:
                recs.append(json.load(f))
    base, other = (c[0] for c in configs)

    def geo(xs: list[float]) -> float:
        return math.exp(statistics.fmean(math.log(x) for x in xs))

    per_seed = {}
    for seed in args.seeds:
        pair = {c: [r["ratio"] for r in recs if r["config"] == c and r["seed"] == seed]
                for c in (base, other)}
        if pair[base] and pair[other]:
            per_seed[seed] = geo(pair[other]) / geo(pair[base])
    tuning = {c: statistics.median(r["tuning_seconds"] for r in recs
                                   if r["config"] == c and r["evaluation"] == 0)
              for c in (base, other) if any(r["config"] == c for r in recs)}
    doc = {**provenance("experiments.network_ab"), "network": args.network,
           "configs": {c: o for c, o in configs}, "seeds": args.seeds,
           "rounds_per_task": args.rounds_per_task, "trials_per_round": args.trials_per_round,
           "per_seed": per_seed, "ratio": geo(list(per_seed.values())) if per_seed else None,
           "tuning_seconds_median": tuning, "records": sorted(
               recs, key=lambda r: (r["seed"], r["evaluation"], r["config"]))}
    lines = [f"# {args.network}: `{other}` against `{base}`, each build timed beside "
             "PyTorch eager", "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']}",
             f"- budget: {args.rounds_per_task} round(s) of {args.trials_per_round} trials for "
             f"every task; seeds {args.seeds}; each build timed {args.evaluations + 1} times "
             "(the tuning run's own, then again alternating), each time in a fresh process "
             "beside PyTorch eager",
             "- configurations: " + "; ".join(f"`{c}`: `{' '.join(o) or '(defaults)'}`"
                                              for c, o in configs), "",
             f"| seed | `{base}` tuned / eager (each timing) | `{other}` tuned / eager (each "
             f"timing) | `{other}` over `{base}` |", "|---|---|---|---|"]
    for seed in args.seeds:
        cells = []
        for c in (base, other):
            rs = sorted((r for r in recs if r["config"] == c and r["seed"] == seed),
                        key=lambda r: r["evaluation"])
            cells.append(", ".join(f"{r['ratio']:.3f} ({r['tuned_ms']:.2f} / "
                                   f"{r['torch_ms']:.2f} ms)" for r in rs))
        ratio = per_seed.get(seed)
        lines.append(f"| {seed} | {cells[0]} | {cells[1]} | "
                     f"{'' if ratio is None else f'{ratio:.3f}'} |")
    if doc["ratio"] is not None:
        lines += ["", f"`{other}` over `{base}` (geometric mean over seeds of the per-seed "
                  f"geometric means of tuned / eager): **{doc['ratio']:.3f}**; median tuning "
                  "seconds: " + ", ".join(f"`{c}` {s:.0f} s" for c, s in tuning.items())]
    write_results(args.out + ".json", args.out + ".md", doc, "\n".join(lines) + "\n",
                  rows_key="records")
    return doc


if __name__ == "__main__":
    main()
