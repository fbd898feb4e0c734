"""Time a network group's tuned builds side by side, in one process.

``python -m bench.compare_frameworks --networks`` tunes a network with each preset in turn; each run
times its own build against PyTorch eager at its end, so two presets' latencies are taken
an hour or more apart, and a shared machine's speed drifts in that time (resnet-18's eager
latency rose from 18.5 to 23.4 ms within its group on 2026-12-03). This script compiles
every preset's build of a group from its work dir's database (the schedules its run
measured, backed by its predicted ones, as ``tune.py`` compiles it), checks each against
the PyTorch reference, and times them all, with PyTorch eager, in alternating rounds of the
same process: the latencies are then comparable directly.

    python -m bench.retime_networks --network vgg-16       # seed 0, 3 rounds per task
    python -m bench.retime_networks --network resnet-18 --work-root /elsewhere/frameworks

The record goes to ``docs/bench/runs/frameworks/<platform>/retime-<network>-<budget>.json``
(``bench.compare_frameworks`` puts it on its page); nothing is tuned or measured into a
database.
"""

from __future__ import annotations

import argparse
import json
import os

from bench.common import in_repo, provenance, repo_relative
from bench.frameworks.plan import (
    PRESETS,
    finished_report,
    network_run_name,
    retime_record_name,
    this_platform,
)

#: The settings of a network run that must agree across a group to time its builds together.
LOWERING_KEYS = ("network", "batch", "fold_bn", "pack_weights", "layout", "input_shape",
                 "onnx", "model")


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--network", required=True)
    p.add_argument("--budget", default="r3", help="the runs' budget label (r3: 3 rounds per "
                                                  "task; t512: 512 trials)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--presets", nargs="+", default=PRESETS)
    p.add_argument("--work-root", help="the runs' work dirs (default "
                                       "work/bench/frameworks/<platform>)")
    p.add_argument("--runs-dir", help="where the record goes (default "
                                      "docs/bench/runs/frameworks/<platform>)")
    p.add_argument("--rounds", type=int,
                   help="alternating timing rounds (default: the runs' evaluate.rounds)")
    p.add_argument("--windows", type=int,
                   help="timing windows per build (default: the runs' evaluate.repeat)")
    p.add_argument("--min-window-ms", type=float,
                   help="a window's minimum length (default: evaluate.min_repeat_ms)")
    return p.parse_args()


def group_configs(work_root: str, network: str, budget: str, seed: int,
                  presets: list[str]) -> dict[str, dict]:
    """Each preset's finished run of the group: its work dir and ``report.json``.

    Raises:
        SystemExit: A run is missing or unfinished, or the runs were lowered differently.
    """
    runs = {}
    for preset in presets:
        work = os.path.join(work_root, network_run_name(network, preset, budget, seed))
        path = os.path.join(work, "report.json")
        report = finished_report(path)
        if report is None:
            raise SystemExit(f"{path}: the group's {preset} run has not finished (missing, or "
                             "without a tuned latency); run or rerun bench.compare_frameworks "
                             "--networks to tune or resume it, or point --work-root at its "
                             "work dirs")
        runs[preset] = {"work_dir": work, "report": report}
    lowered = {p: json.dumps([r["report"]["config"].get(k) for k in LOWERING_KEYS])
               for p, r in runs.items()}
    if len(set(lowered.values())) > 1:
        raise SystemExit(f"the runs were lowered differently ({lowered}); they cannot share "
                         "one network module")
    return runs


def main() -> None:
    args = _parse()
    platform = this_platform()
    work_root = in_repo(args.work_root or os.path.join("work", "bench", "frameworks", platform))
    runs_dir = in_repo(args.runs_dir or os.path.join("docs", "bench", "runs", "frameworks",
                                                     platform))
    runs = group_configs(work_root, args.network, args.budget, args.seed, args.presets)
    measured_on = {r["report"]["target"] for r in runs.values()}

    from metatune.provenance import machine_info
    from tuner.app.run import setup_logging
    from tuner.engine.database import open_database
    from tuner.engine.evaluate import check_output, compile_network
    from tuner.engine.networks import load_network
    from tuner.engine.runtime import runtime_info
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering
    from tuner.engine.timing import interleaved, torch_timer
    from tuner.search.zero_shot import with_predictions

    setup_logging("INFO")
    cfg = next(iter(runs.values()))["report"]["config"]
    target = resolve_target(cfg["target"], cfg.get("num_cores"))
    if target.description not in measured_on or len(measured_on) > 1:
        raise SystemExit(f"the runs were tuned for {sorted(measured_on)}; this machine "
                         f"resolves {target.description}: time them where they were tuned")
    network = load_network(cfg["network"], onnx_path=cfg.get("onnx"), model_spec=cfg.get("model"),
                           input_shape=tuple(cfg["input_shape"]) if cfg.get("input_shape")
                           else None, batch=cfg["batch"], fold_bn=cfg["fold_bn"])
    lowering = Lowering(pack_weights=cfg["pack_weights"], layout=cfg["layout"])
    ecfg = cfg.get("evaluate") or {}
    rounds = args.rounds or ecfg.get("rounds", 5)
    windows = args.windows or ecfg.get("repeat", 10)
    min_window_ms = args.min_window_ms or ecfg.get("min_repeat_ms", 200)
    if network.torch_module is None or target.device_type != "cpu":
        raise SystemExit("side-by-side timing compares with PyTorch eager on the CPU; this "
                         "network has no PyTorch module or the target is not the CPU")
    x = network.example_input()
    reference = network.reference(x)
    timers, checks = {}, {}
    for preset, run in runs.items():
        database = with_predictions(open_database(run["work_dir"]), run["work_dir"])
        built = compile_network(network.relax_mod, target.target, database,
                                target.device_type, lowering)
        checks[preset] = check_output(built.run(x), reference, ecfg.get("rtol", 1e-3))
        timers[preset] = built.timer(x)
        print(f"{preset}: compiled from {run['work_dir']} (rel. error {checks[preset]:.1e})",
              flush=True)
    timers["torch"] = torch_timer(network.torch_module, x, target.num_cores)
    latency = interleaved(timers, windows, min_window_ms, rounds)
    runtime = runtime_info(target.num_cores)  # the threads timed, before anything resets them

    prov = provenance("bench.retime_networks")
    base = latency[args.presets[0]].median_ms
    record = {
        **prov, "network": args.network, "budget": args.budget, "seed": args.seed,
        "target": target.description, "runtime": runtime,
        "machine_info": machine_info(),
        "timing": {"rounds": rounds, "windows": windows, "min_window_ms": min_window_ms,
                   "order": "alternating"},
        "latency_ms": {name: lat.median_ms for name, lat in latency.items()},
        "latency_windows_ms": {name: lat.runs_ms for name, lat in latency.items()},
        f"over_{args.presets[0]}": {p: latency[p].median_ms / base for p in args.presets},
        "check_error": checks,
        "runs": {p: {"work_dir": repo_relative(r["work_dir"]),
                     "trials": r["report"]["trials_total"],
                     "tuned_ms_in_run": r["report"]["latency_ms"]["tuned"],
                     "torch_ms_in_run": r["report"]["latency_ms"].get("torch"),
                     "timed_in_run_at": r["report"]["machine"]["date"]}
                 for p, r in runs.items()},
    }
    os.makedirs(runs_dir, exist_ok=True)
    path = os.path.join(runs_dir, retime_record_name(args.network, args.budget, args.seed))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    for p in [*args.presets, "torch"]:
        print(f"{p:>10}: {latency[p].median_ms:8.2f} ms  ({latency[p].median_ms / base:.3f}x "
              f"{args.presets[0]})")
    print(f"record: {path}")


if __name__ == "__main__":
    main()
