"""Which data layout ``tune.py`` should default to: NHWC against NCHW, end to end.

Each (network, seed) is tuned by ``tune.py`` (default preset) once per layout, to each
budget in turn (128, then resumed to 512 trials), and after each budget the compiled
network is timed beside PyTorch eager, in the same ``tune.py`` run. The two layouts of a
(network, seed, budget) run back to back, so that the machine's drift falls on both.

The default is chosen on networks that no benchmark reports on (the selection networks,
torchvision's ResNet-34, MnasNet-0.5 and RegNetX-400MF by default), never on the five
networks of ``bench/pytorch_parity.py``: the rule, fixed before the runs, is that NHWC
stays the default when the geometric mean over (network, seed) of tuned NHWC / tuned NCHW
latency is below 1 at the largest budget.

Every finished stage is recorded in ``docs/bench/runs/layout-ab/<LAYOUT>/``, so the
command resumes after an interruption, and ``--report-only`` rewrites the page.

    python bench/layout_ab.py                       # about 2 hours on 2 cores
    python bench/layout_ab.py --report-only
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import REPO, geomean, median, provenance, write_results  # noqa: E402
from bench.pytorch_parity import load_record, run_stage, slug  # noqa: E402

NETWORKS = ("torchvision.models:resnet34", "torchvision.models:mnasnet0_5",
            "torchvision.models:regnet_x_400mf")
LAYOUTS = ("NCHW", "NHWC")
RUNS = os.path.join(REPO, "docs", "bench", "runs", "layout-ab")
OUT = os.path.join(REPO, "docs", "bench", "layout-ab")


def runs_dir(layout: str) -> str:
    return os.path.join(RUNS, layout)


def ratios(networks: list[str], seeds: list[int], budget: int) -> list[tuple[str, int, float]]:
    """``(network, seed, NHWC / NCHW tuned latency)`` for every pair recorded at ``budget``."""
    out = []
    for net in networks:
        for seed in seeds:
            a, b = (load_record(net, seed, budget, runs_dir(lay)) for lay in LAYOUTS)
            if a and b:
                out.append((net, seed, b["latency_ms"]["tuned"] / a["latency_ms"]["tuned"]))
    return out


def write_page(networks: list[str], seeds: list[int], budgets: list[int]) -> None:
    """The page and JSON from the stage records."""
    records = [r for lay in LAYOUTS for n in networks for s in seeds for b in budgets
               if (r := load_record(n, s, b, runs_dir(lay))) is not None]
    prov = provenance("layout_ab.py")
    lines = ["# NHWC against NCHW, end to end, on selection networks", "",
             f"Command: `{prov['command']}`; {prov['date']}. Each (network, seed) is tuned by "
             "`tune.py` (default preset, meta-BO-T) in each layout, to each budget in turn "
             "(the larger budget resumes the work dir), and the compiled network is timed "
             "beside PyTorch eager in the same `tune.py` run. Both layouts of a stage run "
             "back to back. Records: `docs/bench/runs/layout-ab/`.", "",
             "The networks are not among those the benchmarks report on; the rule was fixed "
             "before the runs: NHWC stays the default when the geometric mean over "
             "(network, seed) of NHWC / NCHW tuned latency is below 1 at the largest budget.",
             ""]
    machines = sorted({(r["machine"]["cpu"], ",".join(r["machine"].get("cpu_flags", [])),
                        r["target"], f"TVM {r['runtime']['tvm_threads']} / PyTorch "
                        f"{r['runtime']['torch_threads']} threads") for r in records})
    for cpu, flags, target, threads in machines:
        lines.append(f"- Machine: {cpu} (flags: {flags or '?'}); target `{target}`; {threads}.")
    lines += ["", "| network | trials | seed | NCHW ms | NHWC ms | NHWC / NCHW | PyTorch eager "
              "ms (NCHW run / NHWC run) | tasks NCHW / NHWC | tuning min NCHW / NHWC |",
              "|---|---|---|---|---|---|---|---|---|"]
    for net in networks:
        for b in budgets:
            for seed in seeds:
                a, c = (load_record(net, seed, b, runs_dir(lay)) for lay in LAYOUTS)
                if not (a and c):
                    continue
                ta, tc = a["latency_ms"]["tuned"], c["latency_ms"]["tuned"]
                lines.append(
                    f"| {slug(net)} | {b} | {seed} | {ta:.2f} | {tc:.2f} | {tc / ta:.3f} | "
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
    doc = {"command": prov["command"], "date": prov["date"], "summary": summary,
           "records": records}
    write_results(OUT + ".json", OUT + ".md", doc, "\n".join(lines), rows_key="records")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--networks", nargs="+", default=list(NETWORKS),
                   help="built-in names or module:callable specs")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--budgets", nargs="+", type=int, default=[128, 512])
    p.add_argument("--work-root", default=os.path.join(REPO, "work", "layout-ab"))
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
                    write_page(args.networks, args.seeds, budgets)
    write_page(args.networks, args.seeds, budgets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
