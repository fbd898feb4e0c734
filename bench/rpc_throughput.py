"""Trials per minute through TVM's RPC tracker, with 1 and 2 local servers, beside the local
runner, in the same run.

Each configuration tunes the same resnet-18 convolution with random schedules (``random``
cost model, ``replay`` search: no model cost, so the number is the measurement pipeline's:
build here, upload, time on a server, record) for ``--trials`` trials, once per seed. The
servers share this machine's cores (each runs ``cores / servers`` TVM threads), so this
shows the RPC path's overhead and that two servers run concurrently, not a farm's speed.

    python -m bench.rpc_throughput                  # 64 trials, seeds 0 1 2
    python -m bench.rpc_throughput --trials 32 --seeds 0
"""

from __future__ import annotations

import argparse
import statistics

from bench.common import in_repo, provenance, tune_tasks, write_results

TASK = ("resnet-18", "fused_conv2d1_add1_relu11")
OUT = "docs/bench/rpc_throughput"  #: the page's default prefix, relative to the repository


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--batch", type=int, default=16, help="trials per round")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", default=OUT)
    return p.parse_args()


def run_one(task, runner: list[str], *, trials: int, batch: int, seed: int) -> dict:
    """Tune ``task`` with one runner setting; trials, seconds and trials per minute."""
    outcome, *_ = tune_tasks([task], [
        "cost_model=random", "search=replay", f"trials={trials}", f"trials_per_round={batch}",
        f"seed={seed}", "runner.min_repeat_ms=50", *runner], prefix="bench-rpc-")
    return {"trials": outcome.trials_run, "seconds": round(outcome.tuning_seconds, 2),
            "trials_per_min": round(60 * outcome.trials_run / outcome.tuning_seconds, 1)}


def markdown(doc: dict) -> str:
    """The page: trials per minute per runner (median over seeds) and the ratio to the local
    runner (per seed, then the median).

    Args:
        doc: The run's JSON document: provenance, ``target``, ``runtime``, ``task``,
            ``trials``, ``batch``, ``seeds`` and one row per (runner, seed).
    """
    rows = doc["rows"]
    by_runner: dict[str, list[float]] = {}
    for r in rows:
        by_runner.setdefault(r["runner"], []).append(r["trials_per_min"])
    local = {r["seed"]: r["trials_per_min"] for r in rows if r["runner"] == "local"}
    seeds = doc.get("seeds") or sorted({r["seed"] for r in rows})
    lines = ["# Measurement throughput through the RPC tracker", "",
             f"Command: `{doc['command']}`; {doc['machine']}; {doc['date']}; target "
             f"`{doc['target']}`; threads {doc['runtime']}. Task "
             f"`{doc['task']}`, random schedules, {doc['trials']} trials in rounds of "
             f"{doc['batch']}, seeds {seeds}. Servers on 127.0.0.1 share this machine's "
             "cores.", "",
             "| runner | trials/min (median over seeds) | ratio to local (per seed, median) |",
             "|---|---|---|"]
    for name, values in by_runner.items():
        ratios = [r["trials_per_min"] / local[r["seed"]] for r in rows if r["runner"] == name]
        lines.append(f"| {name} | {statistics.median(values):.1f} | "
                     f"{statistics.median(ratios):.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    args = _parse()
    from bench.rpc_farm import local_farm
    from tuner.engine.networks import load_network
    from tuner.engine.runtime import runtime_info
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    info = resolve_target("llvm")
    task = next(t for t in extract_tasks(load_network(TASK[0]).relax_mod, info.target)
                if t.name == TASK[1])
    rows = []
    for seed in args.seeds:  # interleaved per seed, so drift hits every setting alike
        kw = {"trials": args.trials, "batch": args.batch, "seed": seed}
        rows.append({"runner": "local", "seed": seed, **run_one(task, [], **kw)})
        for servers in (1, 2):
            threads = max(1, info.num_cores // servers)
            with local_farm(servers, threads=threads) as farm:
                rpc = farm.rpc
                rows.append({"runner": f"rpc, {servers} server(s) x {threads} thread(s)",
                             "seed": seed, **run_one(task, [
                                 "runner.kind=rpc", f"runner.rpc.tracker_port={rpc.tracker_port}",
                                 f"runner.rpc.key={rpc.key}", f"runner.rpc.servers={servers}"],
                                 **kw)})
            print(rows[-1], flush=True)
    doc = {**provenance("bench.rpc_throughput"), "target": info.description,
           "runtime": runtime_info(info.num_cores), "task": "/".join(TASK),
           "trials": args.trials, "batch": args.batch, "seeds": args.seeds, "rows": rows}
    out = in_repo(args.out)
    write_results(out + ".json", out + ".md", doc, markdown(doc))

if __name__ == "__main__":
    main()
