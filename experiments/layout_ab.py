# Last ran on commit b42af34
"""Which data layout ``tune.py`` should default to: NHWC against NCHW, end to end.

Each (network, seed) is tuned by ``tune.py`` (default preset) once per layout, to each
budget in turn (128, then resumed to 512 trials), and after each budget the compiled
network is timed beside PyTorch eager, in the same ``tune.py`` run. The two layouts of a
(network, seed, budget) run back to back, so that the machine's drift falls on both.

The default is chosen on networks that no benchmark reports on (the selection networks,
torchvision's ResNet-34, MnasNet-0.5 and RegNetX-400MF by default), never on the five
networks of ``bench.pytorch_parity``: the rule, fixed before the runs, is that NHWC
stays the default when the geometric mean over (network, seed) of tuned NHWC / tuned NCHW
latency is below 1 at the largest budget.

A single timing at the end of each ``tune.py`` run is not enough: on these shared 2-core
machines one network's latency moves by 20 % from one minute to the next (alexnet's
128-trial work dirs, timed by ``make tune`` back to back, gave NHWC 1.18x NCHW; compiled
again and timed minutes later, 0.83x). So as soon as both layouts of a stage are tuned,
both work dirs are compiled in one process and timed interleaved (NCHW, NHWC, NHWC, NCHW,
... ``--rounds`` times each), and the verdict uses these paired medians.

Every finished stage is recorded in ``docs/lab/compile/runs/layout-ab/<LAYOUT>/``, its paired
timing in ``docs/lab/compile/runs/layout-ab/paired/``, so the command resumes after an
interruption, and ``--report-only`` rewrites the page.

    python -m experiments.layout_ab                       # about 2.5 hours on 2 cores
    python -m experiments.layout_ab --report-only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from bench.common import (
    REPO,
    geomean,
    machine_lines,
    median,
    provenance,
    run_command,
    write_results,
)
from bench.pytorch_parity import load_record, run_stage, slug

NETWORKS = ("torchvision.models:resnet34", "torchvision.models:mnasnet0_5",
            "torchvision.models:regnet_x_400mf")
LAYOUTS = ("NCHW", "NHWC")
RUNS = os.path.join(REPO, "docs", "lab", "compile", "runs", "layout-ab")
OUT = os.path.join(REPO, "docs", "lab", "compile", "layout-ab")


def runs_dir(layout: str) -> str:
    return os.path.join(RUNS, layout)


def paired_path(network: str, seed: int, budget: int) -> str:
    return os.path.join(RUNS, "paired", f"{slug(network)}-s{seed}-{budget}.json")


def load_paired(network: str, seed: int, budget: int) -> dict | None:
    path = paired_path(network, seed, budget)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def time_paired(network: str, seed: int, budget: int, work_root: str, rounds: int) -> dict:
    """Compile both layouts' work dirs of a stage and time them interleaved.

    Each round times the two compiled networks one after the other (the order alternating
    from round to round), each with ``tune.py``'s own evaluation settings (VM time
    evaluator, ``evaluate.repeat`` runs of at least ``evaluate.min_repeat_ms``).

    Returns:
        ``ms``: layout -> the median of each round's median; ``rounds``: layout -> the
        rounds' medians; ``check_error``: layout -> the output's relative error against
        the reference; written to :func:`paired_path`.
    """
    from experiments.profile_network import compile_work_dir
    from tuner.engine.evaluate import check_output
    from tuner.engine.runtime import runtime_info

    built = {lay: compile_work_dir(os.path.join(work_root, f"{slug(network)}-{lay}-s{seed}"))
             for lay in LAYOUTS}
    x = built[LAYOUTS[0]].network.example_input()
    evaluate = {lay: w.cfg["evaluate"] for lay, w in built.items()}  # each run's own
    errors = {lay: check_output(w.compiled.run(x), w.network.reference(x),
                                evaluate[lay]["rtol"]) for lay, w in built.items()}
    times: dict[str, list[float]] = {lay: [] for lay in LAYOUTS}
    for r in range(rounds):
        for lay in (LAYOUTS if r % 2 == 0 else LAYOUTS[::-1]):
            times[lay].append(built[lay].compiled.time(
                x, evaluate[lay]["repeat"], evaluate[lay]["min_repeat_ms"]).median_ms)
    info = built[LAYOUTS[0]].info
    rec = {"network": network, "seed": seed, "budget": budget, "rounds": times,
           "ms": {lay: median(v) for lay, v in times.items()}, "check_error": errors,
           "target": info.description, "runtime": runtime_info(info.num_cores),
           **provenance("experiments.layout_ab")}
    os.makedirs(os.path.dirname(paired_path(network, seed, budget)), exist_ok=True)
    with open(paired_path(network, seed, budget), "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1)
    return rec


def ratios(networks: list[str], seeds: list[int], budget: int) -> list[tuple[str, int, float]]:
    """``(network, seed, NHWC / NCHW)`` of the paired timings recorded at ``budget``."""
    out = []
    for net in networks:
        for seed in seeds:
            p = load_paired(net, seed, budget)
            if p:
                out.append((net, seed, p["ms"]["NHWC"] / p["ms"]["NCHW"]))
    return out


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def write_page(networks: list[str], seeds: list[int], budgets: list[int]) -> None:
    """The page and JSON from the stage records."""
    records = [r for lay in LAYOUTS for n in networks for s in seeds for b in budgets
               if (r := load_record(n, s, b, runs_dir(lay))) is not None]
    paired = [p for n in networks for s in seeds for b in budgets
              if (p := load_paired(n, s, b)) is not None]
    prov = provenance("experiments.layout_ab")
    lines = ["# NHWC against NCHW, end to end, on selection networks", "",
             f"Command: `{run_command(prov)}`; {prov['date']}. Each (network, seed) is tuned by "
             "`tune.py` (default preset, meta-BO-T) in each layout, to each budget in turn "
             "(the larger budget resumes the work dir), and the compiled network is timed "
             "beside PyTorch eager in the same `tune.py` run. Both layouts of a stage run "
             "back to back. Records: `docs/lab/compile/runs/layout-ab/`.", "",
             "The networks are not among those the benchmarks report on; the rule was fixed "
             "before the runs: NHWC stays the default when the geometric mean over "
             "(network, seed) of NHWC / NCHW tuned latency is below 1 at the largest budget. "
             "The latency it uses is the paired one: both layouts' work dirs compiled in one "
             "process right after the stage and timed interleaved (see the script's "
             "docstring: single timings minutes apart move by 20 % on this machine); the "
             "`tune.py` runs' own timings are shown beside it. (The paired timing was added "
             "once the first two pairs had run at 128 trials, with the same rule; their "
             "paired timings too were taken before their work dirs were resumed.)", ""]
    lines += machine_lines(records)
    lines += ["", "| network | trials | seed | paired NCHW ms | paired NHWC ms | NHWC / NCHW | "
              "tune.py's own NCHW / NHWC ms | PyTorch eager ms (NCHW run / NHWC run) | "
              "tasks NCHW / NHWC | tuning min NCHW / NHWC |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for net in networks:
        for b in budgets:
            for seed in seeds:
                a, c = (load_record(net, seed, b, runs_dir(lay)) for lay in LAYOUTS)
                if not (a and c):
                    continue
                ta, tc = a["latency_ms"]["tuned"], c["latency_ms"]["tuned"]
                p = load_paired(net, seed, b)
                pa, pc = (p["ms"]["NCHW"], p["ms"]["NHWC"]) if p else (None, None)
                lines.append(
                    f"| {slug(net)} | {b} | {seed} | {_fmt(pa)} | {_fmt(pc)} | "
                    f"{_fmt(pc / pa if p else None, 3)} | {ta:.2f} / {tc:.2f} | "
                    f"{a['latency_ms']['torch']:.2f} / {c['latency_ms']['torch']:.2f} | "
                    f"{len(a['tasks'])} / {len(c['tasks'])} | "
                    f"{a['tuning_seconds_total'] / 60:.1f} / "
                    f"{c['tuning_seconds_total'] / 60:.1f} |")
    lines += ["", "## Geometric mean of NHWC / NCHW", "",
              "| trials | pairs | geomean | median | NHWC faster in |", "|---|---|---|---|---|"]
    summary = {}
    for b in budgets:
        rs = ratios(networks, seeds, b)
        if not rs:
            continue
        vals = [r for _, _, r in rs]
        summary[b] = {"pairs": len(rs), "geomean": geomean(vals), "median": median(vals),
                      "nhwc_wins": sum(v < 1 for v in vals)}
        lines.append(f"| {b} | {len(rs)} | {summary[b]['geomean']:.3f} | "
                     f"{summary[b]['median']:.3f} | {summary[b]['nhwc_wins']} of {len(rs)} |")
    if summary:
        top = max(summary)
        g = summary[top]["geomean"]
        complete = summary[top]["pairs"] == len(networks) * len(seeds)
        lines += ["", f"**Verdict at {top} trials"
                  + ("" if complete else f" ({summary[top]['pairs']} of "
                     f"{len(networks) * len(seeds)} pairs run; not final)")
                  + f": {'NHWC' if g < 1 else 'NCHW'}** (geomean {g:.3f}; "
                  f"{abs(math.log(g)) * 100:.0f} % in log terms)."]
    lines.append("")
    doc = {"command": run_command(prov), "date": prov["date"], "summary": summary,
           "paired": paired, "records": records}
    write_results(OUT + ".json", OUT + ".md", doc, "\n".join(lines), rows_key="records")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--networks", nargs="+", default=list(NETWORKS),
                   help="built-in names or module:callable specs")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--budgets", nargs="+", type=int, default=[128, 512])
    p.add_argument("--work-root", default=os.path.join(REPO, "work", "layout-ab"))
    p.add_argument("--rounds", type=int, default=5, help="paired timing rounds per layout")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("overrides", nargs="*", help="more tune.py config overrides")
    args = p.parse_args(argv)
    budgets = sorted(args.budgets)
    if not args.report_only:
        # Budget-major: every pair reaches the small budget before any reaches the large one.
        for budget in budgets:
            for seed in args.seeds:
                for net in args.networks:
                    for lay in LAYOUTS:
                        if load_record(net, seed, budget, runs_dir(lay)) is None:
                            run_stage(net, seed, budget, args.work_root,
                                      ["evaluate.torch_compile=false", f"layout={lay}",
                                       *args.overrides], runs=runs_dir(lay),
                                      work_name=f"{slug(net)}-{lay}-s{seed}")
                    if load_paired(net, seed, budget) is None:
                        time_paired(net, seed, budget, args.work_root, args.rounds)
                    write_page(args.networks, args.seeds, budgets)
    write_page(args.networks, args.seeds, budgets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
