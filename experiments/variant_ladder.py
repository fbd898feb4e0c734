# Last ran on commit (see each rung record's "code")
"""The default against variants of it on whole networks, up a ladder of budgets, every
build timed side by side: a lab A/B with the tuning-speed benchmark's machinery.

Each variant is the default plus ``tune.py`` overrides (``--variant NAME=OVERRIDES``). The
rungs are :mod:`bench.tuning_speed`'s (one work dir per network, variant and seed, resumed
rung by rung, each rung's build exported and checked; the tuning memory off), their
records go to ``<out>-runs/<platform>/``, and each network's builds (every variant, seed
and rung) are timed with PyTorch eager in alternating rounds of one process
(:mod:`bench.tuning_speed_timing`). The page gives, per network, seed and budget, each
variant's latency over the default's and the tuning seconds, and the geometric mean of
the ratios per budget.

    python -m experiments.variant_ladder --variant focus=first_round_trials=4 \\
        --networks torchvision.models:shufflenet_v2_x0_5 torchvision.models:squeezenet1_1 \\
        --seeds 0 1 --budgets 256 512 --out docs/lab/tuning/first-round-ab

Resumable: a rung whose record and build exist is not run again; rerun the command.
"""

from __future__ import annotations

import argparse
import os

from bench import tuning_speed
from bench.common import (
    BENCH_ROUNDS,
    BENCH_WINDOWS,
    geomean,
    in_repo,
    machine_lines,
    measured_span,
    named_overrides,
    provenance,
    run_command,
    write_results,
)
from bench.tuning_speed_page import network_rows
from bench.tuning_speed_records import read_json, rung_records, timing_path

#: The baseline every variant is compared with.
BASE = "default"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from tuner.app.config import EvaluateConfig

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", nargs="+", required=True, metavar="NAME=OVERRIDES",
                   help="variants of the default: NAME=space-separated tune.py overrides")
    p.add_argument("--networks", nargs="+", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--budgets", type=int, nargs="+", default=[256, 512])
    p.add_argument("--windows", type=int, default=BENCH_WINDOWS)
    p.add_argument("--min-window-ms", type=float, default=EvaluateConfig.min_repeat_ms)
    p.add_argument("--rounds", type=int, default=BENCH_ROUNDS)
    p.add_argument("--quiet-wait", type=float, default=10.0)
    p.add_argument("--out", required=True, help="page prefix (.md and .json); records in "
                                                "<out>-runs/")
    p.add_argument("--report-only", action="store_true")
    return p.parse_args(argv)


def compare(rows: list[dict], variants: list[str]) -> list[dict]:
    """Per seed and budget: each variant's latency over the default's and both tuning
    times (rows: :func:`bench.tuning_speed_page.network_rows` of one network)."""
    by = {(r["preset"], r["seed"], r["budget"]): r for r in rows}
    out = []
    for seed, budget in sorted({(r["seed"], r["budget"]) for r in rows}):
        base = by.get((BASE, seed, budget))
        for v in variants:
            other = by.get((v, seed, budget))
            if base is None or other is None:
                continue
            a, b = base.get("latency_ms"), other.get("latency_ms")
            out.append({"variant": v, "seed": seed, "budget": budget, "default_ms": a,
                        "variant_ms": b, "ratio": None if not a or b is None else b / a,
                        "default_seconds": base["cumulative_tuning_seconds"],
                        "variant_seconds": other["cumulative_tuning_seconds"],
                        "loaded": bool((base.get("machine_load") or {}).get("loaded")
                                       or (other.get("machine_load") or {}).get("loaded"))})
    return out


def page(doc: dict) -> str:
    """The markdown page of :func:`document`'s result."""
    lines = [f"# {doc['title']}", "", f"- command: `{doc['command']}`",
             f"- date: {doc['date']}", *([f"- runs measured {doc['measured'][0]} to "
                                          f"{doc['measured'][1]}"] if doc["measured"] else []),
             "- variants (the default plus): " + "; ".join(
                 f"`{n}`: `{' '.join(o)}`" for n, o in doc["variants"].items()),
             "- each latency: every build of the network timed side by side with PyTorch "
             "eager in one process (alternating rounds, median window); tuning seconds: "
             "cumulative over the rungs; `*`: other processes took more than 10 % of the "
             "cores while a rung tuned", "- measured on:",
             *("  " + line for line in doc["machines"]), ""]
    for network, n in doc["networks"].items():
        lines += [f"## {network}", "",
                  "| variant | seed | trials | default ms | variant ms | variant / default "
                  "| default s | variant s |", "|---|---|---|---|---|---|---|---|"]
        for c in n["pairs"]:
            ratio = "-" if c["ratio"] is None else f"{c['ratio']:.3f}"
            lines.append(f"| {c['variant']} | {c['seed']} | {c['budget']} | "
                         f"{_ms(c['default_ms'])} | {_ms(c['variant_ms'])} | {ratio} | "
                         f"{c['default_seconds']:.0f} | {c['variant_seconds']:.0f}"
                         f"{' *' if c['loaded'] else ''} |")
        lines.append("")
    lines += ["## Geometric mean of variant / default over networks and seeds", "",
              "| variant | trials | ratio | pairs | better in |", "|---|---|---|---|---|"]
    for s in doc["summary"]:
        ratio = "-" if s["ratio"] is None else f"{s['ratio']:.3f}"
        lines.append(f"| {s['variant']} | {s['budget']} | {ratio} | {s['pairs']} | "
                     f"{s['better']} |")
    lines.append("")
    return "\n".join(lines)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def document(args: argparse.Namespace, runs: str, platform: str,
             variants: dict[str, list[str]], prov: dict) -> dict:
    """The page's document from the records and timings under ``runs``."""
    networks, records, pairs = {}, [], []
    for network in args.networks:
        recs = rung_records(runs, platform, network)
        timing = read_json(timing_path(runs, platform, network))
        got = compare(network_rows(recs, timing), list(variants))
        networks[network] = {"pairs": got}
        pairs += got
        records += [r for rec in recs for r in rec["rungs"]] + ([timing] if timing else [])
    summary = []
    for v in variants:
        for budget in sorted(set(args.budgets)):
            ratios = [p["ratio"] for p in pairs if p["variant"] == v and p["budget"] == budget
                      and p["ratio"] is not None]
            summary.append({"variant": v, "budget": budget, "ratio": geomean(ratios),
                            "pairs": len(ratios), "better": sum(r < 1 for r in ratios)})
    title = ("Variants of the default on whole networks: "
             + ", ".join(f"{n} ({' '.join(o)})" for n, o in variants.items()))
    return {"title": title, "command": prov["command"], "date": prov["date"],
            "measured": measured_span(records), "variants": variants,
            "machines": machine_lines(records), "networks": networks, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    from bench.frameworks.plan import this_platform
    from bench.tuning_speed_timing import time_networks

    args = _parse(argv)
    variants = dict(named_overrides(args.variant, "--variant"))
    if BASE in variants:
        raise SystemExit(f"--variant {BASE}: the baseline is the default itself; name the "
                         "variant otherwise")
    out = in_repo(args.out)
    runs = out + "-runs"
    platform = this_platform()
    prov = provenance("experiments.variant_ladder")
    prov["command"] = run_command(prov)
    if args.report_only:  # the page keeps the command that measured it
        prov["command"] = (read_json(out + ".json") or {}).get("command", prov["command"])
    presets = [BASE, *variants]
    if not args.report_only:
        tuning_speed.check_tune_args(presets, variants=variants)
        work_root = in_repo(os.path.join("work", "variant-ladder", os.path.basename(out)))
        rungs = tuning_speed.plan(args.networks, presets, args.seeds, args.budgets,
                                  variants)
        tuning_speed.run_ladder(rungs, work_root, runs, platform, [], prov["command"], None)
        time_networks(args.networks, runs, platform,
                      {"windows": args.windows, "min_window_ms": args.min_window_ms,
                       "rounds": args.rounds, "quiet_wait_minutes": args.quiet_wait},
                      prov["command"])
    doc = document(args, runs, platform, variants, prov)
    write_results(out + ".json", out + ".md", doc, page(doc))
    print(f"wrote {out}.md", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
