# Last ran on commit (see each record's "code")
"""A network tuned in f32 and in bf16 at the same budget, then both builds timed side by
side in one process with PyTorch eager, OpenVINO f32 and OpenVINO's default (bf16 on a
CPU with AVX-512 BF16).

Each precision is tuned by ``tune.py`` (its own work dir, the tuning memory off, the
evaluation off), resumed if the work dir holds part of the budget. Both builds (measured
schedules, then the cost model's picks for the tasks no measurement reached) and the other
runtimes are then timed in alternating rounds (:func:`bench.runtime_timers.time_side_by_side`)
and each output compared with PyTorch eager's (relative max error).

    python -m experiments.precision_network --networks resnet-18 --trials 128 \\
        --out docs/lab/precision/networks
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import numpy as np

from bench.common import REPO, provenance, write_json_atomic
from bench.runtimes import tune_work_dir

PRECISIONS = ("fp32", "bf16")


def tuned_build(work_dir: str, report: dict):
    """The work dir's network and its tuned build, lowered in the precision it was tuned
    in. Returns ``(network, compiled network)``."""
    from tuner.app.export import build_target, read_work_dir
    from tuner.engine.database import open_database
    from tuner.engine.evaluate import compile_network
    from tuner.engine.networks import load_network
    from tuner.engine.tasks import Lowering
    from tuner.search.zero_shot import with_predictions

    config = report["config"]
    read_work_dir(work_dir)
    target, device_type = build_target(config, work_dir)
    network = load_network(config.get("network"), model_spec=config.get("model"),
                           batch=int(config.get("batch") or 1),
                           fold_bn=bool(config.get("fold_bn", True)))
    lowering = Lowering(pack_weights=bool(config.get("pack_weights", True)),
                        layout=str(config.get("layout")),
                        precision=str(config.get("precision") or "fp32"))
    database = with_predictions(open_database(work_dir), work_dir)
    return network, compile_network(network.relax_mod, target, database, device_type,
                                    lowering)


def kernel_times(compiled, x, rounds: int = 3, repeat: int = 10) -> dict[str, float]:
    """Microseconds per inference of each function the build calls (all its calls), the
    least of ``rounds`` medians of ``repeat`` instrumented runs
    (:meth:`tuner.engine.evaluate.CompiledNetwork.profile`), slowest first."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        times, _ = compiled.profile(x, repeat)
        for name, (_, us) in times.items():
            best[name] = min(best.get(name, us), us)
    return dict(sorted(best.items(), key=lambda kv: -kv[1]))


def measure(network: str, trials: int, work_root: str, extra: list[str],
            timing: dict) -> dict:
    """Tune ``network`` in both precisions and time both builds beside the others."""
    from bench.machine_load import quiet_timing
    from bench.runtime_timers import Runtime, deploy_runtimes, time_side_by_side, versions
    from metatune.provenance import code_version
    from tuner.engine.runtime import tvm_num_threads
    from tuner.engine.targets import resolve_target

    reports, builds = {}, {}
    for precision in PRECISIONS:
        work_dir = os.path.join(work_root, f"{network}-{trials}-{precision}")
        reports[precision] = tune_work_dir(network, trials, work_dir,
                                           ["--precision", precision, "--no-memory", *extra])
    for precision in PRECISIONS:
        net, compiled = tuned_build(os.path.join(work_root, f"{network}-{trials}-{precision}"),
                                    reports[precision])
        builds[precision] = (net, compiled)
    net = builds["fp32"][0]
    x = net.example_input()
    threads = resolve_target("llvm").num_cores
    failures: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="precision-onnx-") as onnx_dir:
        others = deploy_runtimes(net.torch_module, x, threads, onnx_dir,
                                 names=("torch", "openvino_f32", "openvino_default"),
                                 failures=failures)
    runtimes = {f"tvm_{p}": Runtime(c.timer(x), c.run(x), tvm_num_threads(),
                                    "bf16" if p == "bf16" else "f32")
                for p, (_, c) in builds.items()}
    runtimes.update(others)
    print(f"timing {', '.join(runtimes)} side by side", flush=True)
    with quiet_timing(600, interval=2.0) as loads:
        side = time_side_by_side(runtimes, others["torch"].output, **timing)
    lat = side["latency_ms"]
    profile = {p: kernel_times(c, x) for p, (_, c) in builds.items()}
    # under load the median is the load's; the fastest windows are the cores' own
    low = {n: {"min": min(w), "p10": float(np.percentile(w, 10))}
           for n, w in side["latency_windows_ms"].items()}
    return {
        "network": network, "trials": trials,
        "tuning": {p: {k: r.get(k) for k in ("trials_total", "tuning_seconds", "failures")}
                   | {"tasks": len(r.get("tasks") or []),
                      "bf16_tasks": sum("_bf16" in t["name"] for t in r.get("tasks") or [])}
                   for p, r in reports.items()},
        **side, "failures": failures,
        "fastest_windows_ms": low, "load_before": loads["machine_load_before"],
        "load": loads["machine_load"],
        "kernel_us": profile,
        "bf16_over_fp32": lat["tvm_bf16"] / lat["tvm_fp32"],
        "bf16_over_fp32_p10": low["tvm_bf16"]["p10"] / low["tvm_fp32"]["p10"],
        "bf16_over_fp32_min": low["tvm_bf16"]["min"] / low["tvm_fp32"]["min"],
        "versions": versions(), "code": code_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", nargs="+", default=["resnet-18"])
    parser.add_argument("--trials", type=int, default=128)
    parser.add_argument("--work-root", default=os.path.join(REPO, "work", "precision"))
    parser.add_argument("--windows", type=int, default=20)
    parser.add_argument("--min-window-ms", type=float, default=200.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(REPO, "docs", "lab", "precision",
                                                      "networks"))
    parser.add_argument("extra", nargs="*", help="more tune.py arguments (key=value)")
    args = parser.parse_args()
    timing = {"windows": args.windows, "min_window_ms": args.min_window_ms,
              "rounds": args.rounds}
    os.makedirs(args.out, exist_ok=True)
    for network in args.networks:
        record = {**provenance("experiments.precision_network"),
                  **measure(network, args.trials, args.work_root, args.extra, timing)}
        path = os.path.join(args.out, f"{network}-{args.trials}.json")
        write_json_atomic(path, record)
        lat, err = record["latency_ms"], record["rel_error"]
        print(json.dumps({"network": network, "latency_ms": lat, "rel_error": err,
                          "bf16_over_fp32": record["bf16_over_fp32"]}, indent=1), flush=True)
        print("wrote", path, flush=True)


if __name__ == "__main__":
    main()
