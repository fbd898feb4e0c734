"""Tuned networks against the PyTorch the user already has, on the same CPU, same threads.

For each network and seed, ``tune.py`` (default preset) tunes one work dir to each budget
in turn (512, then continued to 1024, then to 2048 trials: a rerun with a larger budget
resumes), and after each budget compiles the network and times it beside PyTorch eager
and torch.compile, all in that ``tune.py`` run. After the last budget, every conv of the
network is timed alone in PyTorch (oneDNN) and set beside the best tuned schedule of its
task, in GFLOP/s (a network without convs, ``bert-tiny``, has none to set beside).

It tunes in one layout (``--layout``, by default ``tune.py``'s), and the page shows every
layout recorded. Each finished (network, seed, budget) is recorded in
``docs/bench/runs/parity/<layout>/``, so the command resumes after an interruption (a stage
whose record exists is not run again) and ``--report-only`` rewrites the page from the
records.

    python -m bench.pytorch_parity                                   # hours
    python -m bench.pytorch_parity --networks resnet-18 --seeds 0    # one network
    python -m bench.pytorch_parity --layout NCHW                     # the other layout
    python -m bench.pytorch_parity --report-only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bench.common import (
    REPO,
    cpu_tag,
    in_repo,
    machine_lines,
    median,
    network_args,
    provenance,
    run_command,
    write_results,
)
from bench.parity_convs import CONV_FIELDS, match_tasks, onednn_convs

#: The built-in networks (a transformer encoder and a modern CNN beside the classic CNNs).
NETWORKS = ("alexnet", "resnet-18", "vgg-16", "squeezenet", "mobilenet-v2", "convnext-atto",
            "bert-tiny")
SEEDS = (0, 1)
BUDGETS = (512, 1024, 2048)
RUNS = os.path.join(REPO, "docs", "bench", "runs", "parity")
OUT = os.path.join(REPO, "docs", "bench", "pytorch-parity")
STAGE_MARKER = "parity-stage.json"  # in a work dir: the budget it was last tuned to


def slug(network: str) -> str:
    """A file-name-safe name: a built-in network's, or a ``module:callable`` spec's callable."""
    return network.rpartition(":")[2]


def record_path(network: str, seed: int, budget: int, runs: str | None = None) -> str:
    return os.path.join(runs or RUNS, f"{slug(network)}-s{seed}-{budget}.json")


def run_stage(network: str, seed: int, budget: int, work_root: str, extra: list[str],
              runs: str | None = None, work_name: str | None = None) -> dict:
    """Tune ``network``'s work dir up to ``budget`` trials with ``tune.py`` and record it.

    Args:
        network: A built-in network name or a ``module:callable`` spec.
        seed: Tuning seed.
        budget: Trials in total; a work dir tuned to a smaller budget is resumed.
        work_root: Folder of the work dirs.
        extra: More ``tune.py`` overrides (they come last, so they win).
        runs: Folder of the stage records (default: :data:`RUNS`).
        work_name: The work dir's name under ``work_root`` (default ``<network>-s<seed>``).

    Returns:
        The stage record, also written to :func:`record_path`.
    """
    work = os.path.join(work_root, work_name or f"{slug(network)}-s{seed}")
    # the stage this work dir was last tuned to: a rerun continues it; a work dir lost
    # (another machine, a clean clone) starts afresh, and earlier stages' minutes don't count
    marker = os.path.join(work, STAGE_MARKER)
    continued_from = None
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as f:
            continued_from = json.load(f)["budget"]
    cmd = [sys.executable, os.path.join(REPO, "tune.py"), *network_args(network),
           "--trials", str(budget), "--seed", str(seed), "--work-dir", work,
           "evaluate.torch_compile=true", "evaluate.untuned=false", "progress=false",
           "tensorboard=false", *extra]
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)
    with open(os.path.join(work, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    before = load_record(network, seed, continued_from, runs) if continued_from else None
    if continued_from and before is None:
        continued_from = None  # the record of the stage it continued is gone: count it alone
    rec = {
        "network": network, "seed": seed, "budget": budget,
        "latency_ms": report["latency_ms"], "check_error": report["check_error"],
        "tuning_seconds": report["tuning_seconds"],
        "tuning_seconds_total": report["tuning_seconds"] + (
            before["tuning_seconds_total"] if before else 0.0),
        "continued_from": continued_from,
        "trials_total": report["trials_total"], "failures": report["failures"],
        "tasks": report["tasks"], "target": report["target"], "runtime": report["runtime"],
        "machine": report["machine"], "preset": report["preset"],
        "layout": report["config"].get("layout", "NCHW"),
        "timing": report.get("timing"),  # None: tuned, eager and compile timed in turn
    }
    os.makedirs(runs or RUNS, exist_ok=True)
    with open(record_path(network, seed, budget, runs), "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1)
    with open(marker, "w", encoding="utf-8") as f:
        json.dump({"budget": budget}, f)
    return rec


def load_record(network: str, seed: int, budget: int, runs: str | None = None) -> dict | None:
    path = record_path(network, seed, budget, runs)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _each(values: list[float | None], digits: int = 1) -> str:
    """One value per seed, in seed order: ``"10.0 / 30.0"``."""
    return " / ".join(_fmt(v, digits) for v in values)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def task_sum(tasks: list[dict]) -> float | None:
    """Sum over measured tasks of weight x best latency (ms): the network's kernels alone."""
    times = [t["weight"] * t["best_ms"] for t in tasks
             if t.get("schedule") == "measured" and t.get("best_ms")]
    return sum(times) if times else None


def write_page(networks: list[str], seeds: list[int], budgets: list[int],
               layouts: list[str]) -> None:
    """The page and JSON from the records of ``docs/bench/runs/parity/<layout>/``."""
    records = [{**r, "layout": lay}  # the folder's (records before 2026-12-01 lack it)
               for lay in layouts for n in networks for s in seeds for b in budgets
               if (r := load_record(n, s, b, layout_runs(lay))) is not None]
    prov = provenance("bench.pytorch_parity")
    lines = ["# Tuned networks against PyTorch on the same CPU", "",
             "Command: `python -m bench.pytorch_parity` (`--layout NCHW` for the NCHW rows; "
             f"this page was last written by `{run_command(prov)}`). Each network's work dir "
             "is tuned by `tune.py` "
             "(default preset, meta-BO-T) to each budget in turn, and after each budget the "
             "compiled network is timed beside PyTorch eager and torch.compile in the same "
             "`tune.py` run, with the same threads. Records: `docs/bench/runs/parity/<layout>/`"
             ". The last column sums the best measured latency of each measured task (times "
             "its weight, first seed): the kernels alone, without the untuned glue, the "
             "predicted tasks and the runtime between calls. *Timed*: `alternating` rows timed the "
             "tuned network, eager and torch.compile side by side in alternating rounds "
             "(`tune.py` since 2026-12-01); `in turn` rows timed each once after the other.",
             ""]
    lines += machine_lines(records)
    lines += ["", "Where a row has several seeds, each column lists them in seed order; *tuned / "
              "eager* is each run's own ratio (both timed in that run, on that run's CPU), and "
              "the verdicts below take their median.", "",
              "| layout | network | trials | seeds | CPU (`-mcpu`) | tuned ms | PyTorch eager ms "
              "| torch.compile ms | tuned / eager | median tuned / eager | tuning min "
              "(cumulative) | tasks measured / predicted | sum of measured tasks ms | timed |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for lay in layouts:
        for net in networks:
            for b in budgets:
                rows = sorted((r for r in records if r["layout"] == lay
                               and r["network"] == net and r["budget"] == b),
                              key=lambda r: r["seed"])
                if not rows:
                    continue
                ratios = [r["latency_ms"]["tuned"] / r["latency_ms"]["torch"] for r in rows]
                ratio = median(ratios)
                minutes = median([r["tuning_seconds_total"] / 60 for r in rows])
                src = rows[0]["tasks"]

                lines.append(
                    f"| {lay} | {net} | {b} | {', '.join(str(r['seed']) for r in rows)} | "
                    f"{' / '.join(cpu_tag(r) for r in rows)} | "
                    f"{_each([r['latency_ms']['tuned'] for r in rows])} | "
                    f"{_each([r['latency_ms']['torch'] for r in rows])} | "
                    f"{_each([r['latency_ms']['torch_compile'] for r in rows])} | "
                    f"{_each(ratios, 2)} | {_fmt(ratio, 2)} | "
                    f"{_each([r['tuning_seconds_total'] / 60 for r in rows])} | "
                    f"{sum(t['schedule'] == 'measured' for t in src)} / "
                    f"{sum(t['schedule'] == 'predicted' for t in src)} of {len(src)} | "
                    f"{_fmt(task_sum(src))} | "
                    f"{'/'.join(sorted({_timed(r) for r in rows}))} |")
                verdicts.append((lay, net, b, ratio, minutes, len(rows)))
    lines += ["", "## Goals", ""]
    top = max(budgets)
    for lay in layouts:
        r18 = [(b, ratio, m) for la, n, b, ratio, m, _ in verdicts
               if la == lay and n == "resnet-18" and ratio]
        hit = [(b, m) for b, ratio, m in r18 if ratio <= 1.0 and m <= 30]
        lines.append(f"- {lay}: resnet-18 at or below PyTorch eager within 30 tuning minutes: "
                     + (f"**reached** at {hit[0][0]} trials ({hit[0][1]:.1f} min)." if hit else
                        "**not reached** " + ("(" + "; ".join(
                            f"{b} trials: {ratio:.2f}x eager after {m:.1f} min"
                            for b, ratio, m in r18) + ")." if r18 else "(not run yet).")))
        for net in networks:
            at_top = [(ratio, n_seeds) for la, n, b, ratio, _, n_seeds in verdicts
                      if la == lay and n == net and b == top and ratio]
            state = ("not run yet" if not at_top else
                     f"{'**reached**' if at_top[0][0] <= 1.0 else '**not reached**'}: "
                     f"{at_top[0][0]:.2f}x eager (median of the {at_top[0][1]} of "
                     f"{len(seeds)} seeds run at {top} trials)")
            lines.append(f"- {lay}: {net} at or below 1.0x PyTorch eager at {top} trials: "
                         f"{state}.")
    latest: dict[tuple[str, str], dict] = {}  # per layout and network: the largest budget's
    for r in records:
        key = (r["layout"], r["network"])
        if r.get("convs") and r["budget"] >= latest.get(key, {"budget": -1})["budget"]:
            latest[key] = r
    conv_rows = [(lay, net, cpu_tag(r), c) for (lay, net), r in latest.items()
                 for c in r["convs"]]
    if conv_rows:
        lines += ["", "## Each convolution against oneDNN", "",
                  "Every conv layer timed alone in PyTorch (oneDNN, same threads), beside the "
                  "best measured schedule of its TVM task (matched by input and weight shapes, "
                  "or by FLOPs in records that lack the shapes, when one task alone matches; "
                  "the task adds bias and activation), seed 0 at the largest budget run.", "",
                  "| layout | network | CPU | layer | in, out, k, stride, groups, size | MFLOP | "
                  "TVM task | TVM GFLOP/s | oneDNN GFLOP/s | TVM / oneDNN |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for lay, net, cpu, c in conv_rows:
            ratio = (c["tvm_gflops"] / c["torch_gflops"]) if c["tvm_gflops"] else None
            lines.append(f"| {lay} | {net} | {cpu} | {c['layer']} | "
                         f"{', '.join(map(str, c['shape']))} | "
                         f"{c['flops'] / 1e6:.0f} | "
                         + (f"{c['task']} ({c['schedule']})" if c["task"] else
                            f"- ({c.get('candidates', 0)} tasks match)")
                         + f" | {_fmt(c['tvm_gflops'])} | "
                         f"{_fmt(c['torch_gflops'])} | {_fmt(ratio, 2)} |")
    lines.append("")
    doc = {"command": run_command(prov), "date": prov["date"], "records": records}
    write_results(OUT + ".json", OUT + ".md", doc, "\n".join(lines), rows_key="records")


def page_selection(networks: list[str], seeds: list[int], budgets: list[int],
                   layouts: list[str]) -> tuple[list[str], list[int], list[int], list[str]]:
    """The networks, seeds and budgets of every stage record of ``layouts`` (read from the
    files), with the defaults and this command's own: what the page shows."""
    found = []
    for lay in layouts:
        folder = layout_runs(lay)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.endswith(".json"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    rec = json.load(f)
                found.append((rec["network"], rec["seed"], rec["budget"]))
    return (list(dict.fromkeys([*NETWORKS, *networks, *(n for n, _, _ in found)])),
            sorted({*SEEDS, *seeds, *(s for _, s, _ in found)}),
            sorted({*BUDGETS, *budgets, *(b for _, _, b in found)}), layouts)


def _timed(record: dict) -> str:
    """How a stage's latencies were timed: side by side (alternating rounds) or in turn."""
    return "alternating" if record.get("timing") else "in turn"


def layout_runs(layout: str) -> str:
    """The stage records of one layout."""
    return os.path.join(RUNS, layout)


def main(argv: list[str] | None = None) -> int:
    global RUNS, OUT
    from tuner.app.config import TuneConfig
    from tuner.engine.tasks import LAYOUTS

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--networks", nargs="+", default=list(NETWORKS))
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    p.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    p.add_argument("--layout", default=TuneConfig.layout, choices=LAYOUTS,
                   help="the layout to tune in (default: tune.py's); the page shows all")
    p.add_argument("--work-root", default=os.path.join(REPO, "work", "parity"))
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--runs-dir", default=RUNS, help="where the stage records go, per layout")
    p.add_argument("--out", default=OUT, help="page and JSON path, without extension")
    p.add_argument("overrides", nargs="*", help="tune.py config overrides")
    args = p.parse_args(argv)
    RUNS, OUT = in_repo(args.runs_dir), in_repo(args.out)
    budgets = sorted(args.budgets)
    runs = layout_runs(args.layout)
    # the page shows every record, not only this command's selection
    page = page_selection(args.networks, args.seeds, budgets, list(LAYOUTS))
    if not args.report_only:
        for seed in args.seeds:
            for net in args.networks:
                for budget in budgets:
                    if load_record(net, seed, budget, runs) is None:
                        run_stage(net, seed, budget, args.work_root,
                                  [f"layout={args.layout}", *args.overrides], runs=runs,
                                  work_name=f"{slug(net)}-{args.layout}-s{seed}")
                last = load_record(net, seed, budgets[-1], runs)
                if last is not None and seed == SEEDS[0]:  # the page: seed 0, largest budget
                    if "convs" in last:  # timed before: pair again, do not re-time
                        convs = [{k: c[k] for k in CONV_FIELDS} for c in last["convs"]]
                    else:
                        from tuner.engine.targets import resolve_target

                        convs = onednn_convs(net, resolve_target("llvm").num_cores)
                    last["convs"] = match_tasks(convs, last["tasks"])
                    with open(record_path(net, seed, budgets[-1], runs), "w",
                              encoding="utf-8") as f:
                        json.dump(last, f, indent=1)
                write_page(*page)
    write_page(*page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
