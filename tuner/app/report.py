"""The tuning report: ``report.json``, a printed table and a PNG of the tuning curves."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from metatune.device import describe, resolve_device
from metatune.files import write_json_atomic
from metatune.provenance import code_version, machine_info
from tuner.app.config import TuneConfig, preset_of
from tuner.app.monitor import read_curves
from tuner.engine.runtime import runtime_info
from tuner.search.zero_shot import schedule_sources

REPORT_FILE = "report.json"
CURVES_PNG = "tuning_curves.png"


def build_report(*, cfg: TuneConfig, network, tasks: list, target_info, outcome,
                 database, work_dir: str) -> dict[str, Any]:
    """``report.json``'s content after tuning, before evaluation (latencies still ``None``).

    Args:
        cfg: The tune configuration (written into the report as a plain dict).
        network: The :class:`tuner.engine.networks.Network` tuned.
        tasks: Its :class:`tuner.engine.tasks.TaskInfo` list, in tuning order.
        target_info: The :class:`tuner.engine.targets.TargetInfo` tuned for.
        outcome: The :class:`tuner.app.tuning.TuningOutcome`.
        database: The measured database (where each task's schedule comes from).
        work_dir: The work directory.
    """
    return {
        "network": network.name,
        "input_shape": list(network.input_shape),
        "target": target_info.description,
        "preset": preset_of(cfg),
        "cost_model": cfg.cost_model,
        "graph": cfg.metatune.graph if cfg.cost_model == "metatune" else None,
        "search": cfg.search,
        "precision": cfg.precision,
        "trials": cfg.trials,
        "trials_run": outcome.trials_run,
        "trials_total": outcome.trials_before + outcome.trials_run,
        "failures": outcome.failures,
        "common_errors": [{"error": e, "count": c} for e, c in outcome.errors],
        "tuning_seconds": round(outcome.tuning_seconds, 2),
        "seconds_per_trial": (round(outcome.tuning_seconds / outcome.trials_run, 3)
                              if outcome.trials_run else None),
        "rounds": outcome.rounds,
        "predict_seconds": round(outcome.predict_seconds, 2),
        "memory": outcome.memory,  # the tuning memory's part (tuner/app/memory_run.py)
        "tasks": [
            {"name": t.name, "flops": t.flops, "weight": t.weight, "args": t.arg_shapes,
             "best_ms": b, "schedule": source, "trials": n}
            for t, b, source, n in zip(tasks, outcome.best_ms,
                                       schedule_sources(tasks, database, work_dir),
                                       outcome.trials_per_task or [None] * len(tasks), strict=False)
        ],
        "notes": network.notes,
        "latency_ms": {"tuned": None, "untuned": None, "torch": None, "torch_compile": None},
        "check_error": None,
        "machine": machine_info(),
        "runtime": runtime_info(target_info.num_cores),
        "model_device": describe(resolve_device(cfg.device)),
        "config": asdict(cfg),
        "code": code_version(),
        "work_dir": work_dir,
    }


def write_report(work_dir: str, report: dict[str, Any]) -> str:
    """Write ``report.json`` atomically; return its path."""
    path = os.path.join(work_dir, REPORT_FILE)
    write_json_atomic(path, report, indent=2)
    return path


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ms"


def _threads(runtime: dict[str, Any] | None) -> str:
    if not runtime:
        return "-"
    return f"{runtime['tvm_threads']} / {runtime['torch_threads']}"


def _sources(tasks: list[dict[str, Any]]) -> str:
    counts = {k: sum(t.get("schedule") == k for t in tasks)
              for k in ("measured", "predicted", "default")}
    return ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "-"


def _memory_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The tuning memory's row: tasks it knew, the budget it saved."""
    memory = report.get("memory")
    if not memory:
        return []
    text = (f"{memory['known']} of {memory['tasks']} known ({memory['records_copied']} "
            f"records copied), budget {memory['budget']} of {report['trials']} trials")
    if memory.get("claimed"):
        text += f"; {memory['claimed']} tuned by another run"
    return [("tasks from the tuning memory", text)]


def format_report(report: dict[str, Any]) -> str:
    """The human-readable summary printed at the end of ``tune.py``."""
    lat = report.get("latency_ms", {})
    tuned, untuned, torch_ms = lat.get("tuned"), lat.get("untuned"), lat.get("torch")
    timing = report.get("timing")
    where = (timing or {}).get("where", "local")  # "rpc <key>@<tracker>": timed on a server
    rows = [
        ("network", report["network"]),
        ("target", report["target"]),
        ("threads (TVM / PyTorch)", _threads(report.get("runtime")) if where == "local"
         else "the RPC server's (its TVM_NUM_THREADS)"),
        ("cost model / search", f"{report['cost_model']} / {report['search']}"
         + (f"  (preset {report['preset']})" if report.get("preset") else "")
         + (f", on {report['model_device']}" if report.get("model_device") else "")),
        ("trials (this run / in database / budget)",
         f"{report['trials_run']} / {report['trials_total']} / {report['trials']}"),
        ("failed measurements (this run)", str(report["failures"])),
        ("task schedules", _sources(report.get("tasks", []))),
        *_memory_rows(report),
        ("tuning wall time (this run)", f"{report['tuning_seconds']:.1f} s"),
        ("latency tuned", _ms(tuned)),
        ("latency untuned TVM", _ms(untuned)
         + (f"  (tuned is {untuned / tuned:.1f}x faster)" if tuned and untuned else "")),
        ("latency PyTorch eager", _ms(torch_ms)
         + (f"  (tuned / torch = {tuned / torch_ms:.2f})" if tuned and torch_ms else "")),
    ]
    if lat.get("torch_compile"):
        rows.append(("latency torch.compile", _ms(lat["torch_compile"])))
    if timing and tuned:
        alone = not (torch_ms or lat.get("torch_compile"))
        rows.append(("latency timing", f"median of {timing['windows']} windows of >= "
                     f"{timing['min_window_ms']} ms each, over {timing['rounds']} rounds"
                     + ("" if alone else " alternating the runtimes")
                     + ("" if where == "local" else f", on {where}")))
    rounds = report.get("rounds") or {}
    if rounds.get("rounds"):
        rows.append(("time in search / measurement / model update",
                     f"{rounds['search_seconds']:.1f} / {rounds['measure_seconds']:.1f} / "
                     f"{rounds['update_seconds']:.1f} s"))
    if report.get("check_error") is not None:
        precision = report.get("precision") or "fp32"
        rows.append(("output check (rel. max error)", f"{report['check_error']:.1e}"
                     + (f"  ({precision}, tolerance {report['check_rtol']:.0e})"
                        if precision != "fp32" and report.get("check_rtol") else "")))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def plot_curves(work_dir: str, title: str) -> str | None:
    """Plot best latency per task and the network estimate against trials.

    Returns:
        The PNG path, or ``None`` when there is nothing to plot.
    """
    rows = read_curves(work_dir)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_task, ax_net) = plt.subplots(1, 2, figsize=(12, 4.5))
    tasks: dict[str, tuple[list, list]] = {}
    for r in rows:
        if r.get("task_best_ms") is not None:
            xs, ys = tasks.setdefault(f"{r['task_id']:02d} {r['task']}", ([], []))
            xs.append(r["trial"])
            ys.append(r["task_best_ms"])
    for label, (xs, ys) in sorted(tasks.items()):
        ax_task.step(xs, ys, where="post", marker="o", markersize=3, label=label[:28])
    ax_task.set(xlabel="measured trials (all tasks)", ylabel="best latency of task (ms)",
                yscale="log", title="per task")
    if len(tasks) <= 12:
        ax_task.legend(fontsize=6)
    net = [(r["trial"], r["network_estimate_ms"]) for r in rows if r.get("network_estimate_ms")]
    part = [(r["trial"], r["measured_tasks_ms"]) for r in rows if r.get("measured_tasks_ms")]
    if net:
        ax_net.step(*zip(*net, strict=False), where="post", marker="o", markersize=3,
                    label="all tasks")
    if part:
        n_tasks = len({r["task_id"] for r in rows}) if not net else None
        ax_net.step(*zip(*part, strict=False), where="post", marker=".", markersize=3, alpha=0.6,
                    label="tasks measured so far" + (f" ({n_tasks})" if n_tasks else ""))
        ax_net.legend(fontsize=7)
    ax_net.set(xlabel="measured trials", ylabel="sum of weight x best latency (ms)",
               title="network estimate")
    fig.suptitle(title)
    fig.tight_layout()
    path = os.path.join(work_dir, CURVES_PNG)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
