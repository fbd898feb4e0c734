# Last ran on commit 9a0926d
"""Where a tuned network's time goes: each kernel inside the network against the same
schedule timed alone, all in one run on this machine.

For a ``tune.py`` work dir, the network is compiled with the work dir's database as
``tune.py`` compiles it and run with the Relax VM's instrument hooks, which time every
call: the kernels, and the VM's built-ins (allocation, reshapes, copies). Each task's best
schedule is then built and timed alone by MetaSchedule's runner twice: as during tuning
(the work dir's runner settings, warm caches), and with the CPU caches flushed before
each run. Per task, the page sets the calls' time in the network beside calls x time
alone (warm and cold), and the network's latency beside the sum of its kernels, so the
gap between "the sum of the tuned tasks" and "the network" is split into kernels that
run slower in the network, untuned glue, and the VM's own work.

    python -m experiments.profile_network --work-dir work/parity/resnet-18-s0
"""

from __future__ import annotations

import argparse
import json
import os

from bench.common import REPO, measure, provenance, write_results


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", required=True, help="a tune.py work dir (report.json, database)")
    p.add_argument("--repeat", type=int, default=20, help="instrumented network runs")
    p.add_argument("--out", default=None,
                   help="page and JSON path without extension "
                        "(default docs/lab/compile/profile-<network>)")
    return p.parse_args(argv)


def time_alone(database, tasks, info, runner_cfg: dict, *, flush: bool) -> dict[str, float]:
    """Each task's best schedule, built and timed alone by MetaSchedule's runner.

    Args:
        database: The work dir's database.
        tasks: :class:`tuner.engine.tasks.TaskInfo` list.
        info: The :class:`tuner.engine.targets.TargetInfo`.
        runner_cfg: The work dir's ``runner`` settings (``number``, ``repeat``,
            ``min_repeat_ms``).
        flush: Flush the CPU caches before each run.

    Returns:
        Task name -> mean seconds of one call (tasks without a valid record are left out).
    """
    picked = {}
    for t in tasks:
        sch = database.query_schedule(t.extracted.dispatched[0], info.target,
                                      workload_name="main")
        if sch is not None:
            picked[t.name] = sch.mod
    runner = {k: int(runner_cfg.get(k, default))
              for k, default in (("number", 3), ("repeat", 1), ("min_repeat_ms", 100))}
    secs = measure(list(picked.values()), info, {**runner, "enable_cpu_cache_flush": flush})
    return {name: s for name, s in zip(picked, secs, strict=False) if s is not None}


def function_tasks(fused, tasks) -> dict[str, str]:
    """The task each function of a fused network belongs to.

    Args:
        fused: The fused ``IRModule`` the network was compiled from
            (:func:`tuner.engine.evaluate.compile_network`'s ``on_fused``).
        tasks: :class:`tuner.engine.tasks.TaskInfo` list.

    Returns:
        Function name -> task name (the functions of one task share its workload).
    """
    import tvm
    from tvm_ffi import structural_hash

    def key(func) -> int:  # a function's body and buffers, whatever its name
        return structural_hash(func.without_attr("global_symbol"))

    by_hash = {key(next(iter(t.extracted.dispatched[0].functions.values()))): t.name
               for t in tasks}
    return {gv.name_hint: by_hash[key(func)] for gv, func in fused.functions.items()
            if isinstance(func, tvm.tirx.PrimFunc) and key(func) in by_hash}


def symbol_task(symbol: str, owner: dict[str, str]) -> str | None:
    """The task a called symbol runs: its function's, where the weight-packing split
    renamed it (``<function>_<suffix>``); ``None`` for built-ins and other functions."""
    if symbol in owner:
        return owner[symbol]
    prefixes = [f for f in owner if symbol.startswith(f + "_")]
    return owner[max(prefixes, key=len)] if prefixes else None


def compile_work_dir(work: str):
    """Compile a ``tune.py`` work dir's network as ``tune.py`` does (its report's settings,
    its database with the predicted schedules).

    Args:
        work: The work dir (``report.json``, database).

    Returns:
        A namespace with ``cfg`` (the report's config), ``info`` (target), ``network``,
        ``lowering``, ``tasks``, ``database``, ``compiled`` (the
        :class:`tuner.engine.evaluate.CompiledNetwork`) and ``fused`` (the fused
        ``IRModule`` it was compiled from).
    """
    from types import SimpleNamespace

    from tuner.engine.database import open_database
    from tuner.engine.evaluate import compile_network
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.networks import load_network
    from tuner.engine.runtime import configure_tvm_threads
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks
    from tuner.search.zero_shot import with_predictions

    with open(os.path.join(work, "report.json"), encoding="utf-8") as f:
        cfg = json.load(f)["config"]
    info = resolve_target(cfg["target"], cfg.get("num_cores"))
    configure_tvm_threads(info.num_cores)
    load_tensor_intrinsics((info.kind,))
    network = load_network(cfg.get("network"), onnx_path=cfg.get("onnx"),
                           model_spec=cfg.get("model"),
                           input_shape=tuple(cfg["input_shape"]) if cfg.get("input_shape")
                           else None, batch=cfg.get("batch", 1), fold_bn=cfg.get("fold_bn", True))
    lowering = Lowering(pack_weights=cfg.get("pack_weights", True),
                        layout=cfg.get("layout", "NCHW"))
    tasks = extract_tasks(network.relax_mod, info.target, lowering)
    database = with_predictions(open_database(work), work)  # as tune.py compiles
    fused: list = []
    compiled = compile_network(network.relax_mod, info.target, database, info.device_type,
                               lowering, on_fused=fused.append)
    return SimpleNamespace(cfg=cfg, info=info, network=network, lowering=lowering,
                           tasks=tasks, database=database, compiled=compiled, fused=fused[0])


def run(argv: list[str] | None = None) -> dict:
    """Profile a work dir's network; returns the JSON document."""
    args = _parse(argv)
    work = os.path.abspath(args.work_dir)
    from metatune.provenance import simd_flags
    from tuner.engine.runtime import runtime_info

    w = compile_work_dir(work)
    cfg, info, network, tasks, database, compiled = (w.cfg, w.info, w.network, w.tasks,
                                                     w.database, w.compiled)
    x = network.example_input()
    latency = compiled.time(x, 10, 200).median_ms
    calls, instrumented_ms = compiled.profile(x, args.repeat)
    owner = function_tasks(w.fused, tasks)
    warm = time_alone(database, tasks, info, cfg.get("runner", {}), flush=False)
    cold = time_alone(database, tasks, info, cfg.get("runner", {}), flush=True)

    rows = []
    for t in tasks:
        mine = {s: v for s, v in calls.items() if symbol_task(s, owner) == t.name}
        n = sum(c for c, _ in mine.values())
        rows.append({"task": t.name, "weight": t.weight, "calls": n,
                     "symbols": sorted(mine), "network_us": sum(us for _, us in mine.values()),
                     "alone_warm_us": warm[t.name] * 1e6 * t.weight if t.name in warm else None,
                     "alone_cold_us": cold[t.name] * 1e6 * t.weight if t.name in cold else None})
    other = sorted(((s, c, us) for s, (c, us) in calls.items()
                    if symbol_task(s, owner) is None),
                   key=lambda r: -r[2])
    doc = {
        **provenance("experiments.profile_network"), "work_dir": os.path.relpath(work, REPO),
        "network": network.name, "target": info.description,
        "runtime": runtime_info(info.num_cores), "cpu_flags": simd_flags(),
        "runner": cfg.get("runner", {}), "repeat": args.repeat,
        "latency_ms": latency, "instrumented_ms": instrumented_ms,
        "tasks": rows,
        "other_calls": [{"symbol": s, "calls": c, "us": us} for s, c, us in other],
    }
    out = args.out or os.path.join(REPO, "docs", "lab", "compile", f"profile-{network.name}")
    write_results(out + ".json", out + ".md", doc, _markdown(doc))
    return doc


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1e3:.2f}"


def _markdown(doc: dict) -> str:
    rows = doc["tasks"]
    kernels = sum(r["network_us"] for r in rows)
    other = sum(r["us"] for r in doc["other_calls"])
    warm = sum(r["alone_warm_us"] or 0 for r in rows)
    cold = sum(r["alone_cold_us"] or 0 for r in rows)
    lines = [
        f"# Where {doc['network']}'s time goes: kernels in the network against alone", "",
        f"- command: `{doc['command']}`", f"- date: {doc['date']}",
        # provenance()'s machine line names the flags, the local target and the threads
        f"- machine: {doc['machine']}" + ("" if f"`{doc['target']}`" in doc["machine"]
                                          else f"; network compiled for `{doc['target']}`"),
        f"- work dir: `{doc['work_dir']}`; runner settings alone: "
        + ", ".join(f"{k} {doc['runner'][k]}" for k in ("number", "repeat", "min_repeat_ms")
                    if k in doc["runner"]),
        "",
        f"Network latency (VM time evaluator, median of 10): **{doc['latency_ms']:.2f} ms**. "
        f"Instrumented run (median of {doc['repeat']}): {doc['instrumented_ms']:.2f} ms, of "
        f"which the tasks' kernels {kernels / 1e3:.2f} ms and every other call (built-ins, "
        f"functions of no task) {other / 1e3:.2f} ms. The same best schedules timed alone: "
        f"{warm / 1e3:.2f} ms warm (as tuning measures them), {cold / 1e3:.2f} ms with "
        "the caches flushed.", "",
        "| task | calls | in network ms | alone, warm ms | alone, cold ms | network / warm |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: -r["network_us"]):
        ratio = (f"{r['network_us'] / r['alone_warm_us']:.2f}"
                 if r["alone_warm_us"] else "-")
        lines.append(f"| {r['task']} | {r['calls']} | {_ms(r['network_us'])} | "
                     f"{_ms(r['alone_warm_us'])} | {_ms(r['alone_cold_us'])} | {ratio} |")
    lines += ["", "Other calls, heaviest first:", "", "| symbol | calls | ms |", "|---|---|---|"]
    lines += [f"| `{r['symbol']}` | {r['calls']} | {r['us'] / 1e3:.3f} |"
              for r in doc["other_calls"][:15]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    run()
