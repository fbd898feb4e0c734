# Last ran on commit 3b180ad
"""The cost model's zero-shot pick against TVM's default schedule and one measured round.

A task that the budget does not reach gets the schedule the cost model scores best
(:mod:`tuner.search.zero_shot`), never measured while tuning. This benchmark measures, for every
task of the given networks, with the same builder and runner as tuning:

- ``default``: the task as TVM compiles it with no schedule (what an unmeasured task ran
  before: a naive single-threaded loop nest);
- ``zero-shot``: the cost model's pick (default preset's model, no measurement of the task);
- ``one round``: the best of one measured 16-trial round of the default preset;

and summarizes them per task kind (conv, dense, pool, elementwise) as geomean ratios.
Each (network, seed) is recorded under ``--runs-dir``: rerun to resume.

    python -m experiments.zero_shot                            # alexnet and resnet-18, 1 seed
    python -m experiments.zero_shot --networks squeezenet --seeds 0 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bench.common import REPO, geomean, measure, provenance, tune_tasks, write_results

#: The runner settings (``tuner.app.config.RunnerConfig`` fields).
RUNNER = {"timeout_sec": 60, "number": 3, "repeat": 1, "min_repeat_ms": 100,
          "enable_cpu_cache_flush": False}


def task_kind(name: str) -> str:
    """``conv``, ``dense``, ``pool`` or ``elementwise`` from a task's name."""
    if "conv" in name:
        return "conv"
    if "matmul" in name or "dense" in name:
        return "dense"
    if "pool" in name:
        return "pool"
    return "elementwise"


def run_network(network: str, seed: int) -> dict:
    """Default, zero-shot and one-round latency of every task of ``network``."""
    from tuner.app.config import load_tune_config
    from tuner.app.session import build_cost_model
    from tuner.engine.networks import load_network
    from tuner.engine.runtime import runtime_info
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks
    from tuner.search.zero_shot import predict_best

    info = resolve_target("llvm")
    cfg = load_tune_config(overrides=[f"seed={seed}"])
    tasks = extract_tasks(load_network(network).relax_mod, info.target)
    model = build_cost_model(cfg, info)
    mods = [t.extracted.dispatched[0] for t in tasks]
    picks = [predict_best(m, info.target, model, cfg.predict_unmeasured,
                          seed=seed, num_threads=info.num_cores, task_name=t.name)
             for m, t in zip(mods, tasks, strict=False)]
    default = measure(mods, info, RUNNER)
    zero = measure([p.mod if p is not None else m for p, m in zip(picks, mods, strict=False)], info,
                   RUNNER)
    rows = []
    for t, d, z in zip(tasks, default, zero, strict=False):
        outcome, *_ = tune_tasks([t], ["preset=meta-BO-T", "trials=16", "trials_per_round=16",
                                       f"seed={seed}"], prefix="bench-zero-shot-")
        best = outcome.best_ms[0]
        rows.append({"task": t.name, "kind": task_kind(t.name), "flops": t.flops,
                     "weight": t.weight, "default_ms": None if d is None else d * 1e3,
                     "zero_shot_ms": None if z is None else z * 1e3, "one_round_ms": best})
        print(rows[-1], flush=True)
    return {"network": network, "seed": seed, "tasks": rows,
            "runtime": runtime_info(info.num_cores), "target": info.description}


def write_page(records: list[dict], out: str) -> None:
    prov = provenance("experiments.zero_shot")
    lines = ["# Zero-shot pick vs TVM's default schedule and one measured round", "",
             f"Command: `{prov['command']}`; {prov['machine']}; {prov['date']}.", "",
             *sorted({f"- Measured on `{r['target']}`, TVM {r['runtime']['tvm_threads']} / "
                      f"PyTorch {r['runtime']['torch_threads']} threads." for r in records}),
             "",
             "Per task kind, geomean over tasks and seeds of each ratio (below 1: the "
             "first is faster).", "",
             "| kind | tasks | zero-shot / default | zero-shot / one round |", "|---|---|---|---|"]
    rows = [r for rec in records for r in rec["tasks"]]
    for kind in ("conv", "dense", "pool", "elementwise"):
        sel = [r for r in rows if r["kind"] == kind]
        if not sel:
            continue
        vs_default = geomean([r["zero_shot_ms"] / r["default_ms"] for r in sel
                              if r["zero_shot_ms"] and r["default_ms"]])
        vs_round = geomean([r["zero_shot_ms"] / r["one_round_ms"] for r in sel
                            if r["zero_shot_ms"] and r["one_round_ms"]])
        lines.append(f"| {kind} | {len(sel)} | {vs_default:.3f} | {vs_round:.2f} |"
                     if vs_default and vs_round else f"| {kind} | {len(sel)} | - | - |")
    lines += ["", "| network | seed | task | kind | default ms | zero-shot ms | one round ms |",
              "|---|---|---|---|---|---|---|"]
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    for rec in records:
        for r in rec["tasks"]:
            lines.append(f"| {rec['network']} | {rec['seed']} | {r['task']} | {r['kind']} | "
                         f"{fmt(r['default_ms'])} | {fmt(r['zero_shot_ms'])} | "
                         f"{fmt(r['one_round_ms'])} |")
    lines.append("")
    write_results(out + ".json", out + ".md", {**prov, "records": records}, "\n".join(lines),
                  rows_key="records")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--networks", nargs="+", default=["alexnet", "resnet-18"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--runs-dir", default=os.path.join(REPO, "docs/lab/search/runs/zero_shot"))
    p.add_argument("--out", default=os.path.join(REPO, "docs/lab/search/zero_shot"))
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    os.makedirs(args.runs_dir, exist_ok=True)
    records = []
    for seed in args.seeds:
        for net in args.networks:
            path = os.path.join(args.runs_dir, f"{net}-s{seed}.json")
            if not os.path.exists(path) and not args.report_only:
                rec = run_network(net, seed)
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(rec, f, indent=1)
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    records.append(json.load(f))
    write_page(records, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
