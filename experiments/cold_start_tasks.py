# Last ran on commit 82b5d40
"""The runs of :mod:`experiments.cold_start`: its workloads as tasks (the generator's, or
a built-in network's ``network/task``), and one tuning run of one."""

from __future__ import annotations

import functools
import json
import os

from bench.common import REPO, tune_tasks


def default_workloads(checkpoint_json: str) -> list[str]:
    """The checkpoint's validation workloads that are convolutions (dense left out)."""
    with open(checkpoint_json, encoding="utf-8") as f:
        names = json.load(f)["data"]["val_workloads"]
    return [n for n in names if n.startswith(("conv", "winograd", "depthwise"))]


def is_network_task(name: str) -> bool:
    """Whether a workload name is a built-in network's task (``network/task``)."""
    return "/" in name


@functools.lru_cache(maxsize=None)
def network_tasks(network: str, layout: str = "NCHW") -> dict:
    """A built-in network's tasks by name, extracted for this machine's target once, in
    ``layout`` (NCHW: as the datasets' held-out splits; NHWC: ``tune.py``'s default)."""
    from tuner.engine.networks import load_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    info = resolve_target("llvm")
    return {t.name: t for t in extract_tasks(load_network(network).relax_mod, info.target,
                                             Lowering(layout=layout))}


def workload_task(name: str, layout: str = "NCHW"):
    """A :class:`tuner.engine.tasks.TaskInfo` for a workload of the dataset's generator
    (``configs/collect.yaml``'s ``per_kind`` and ``seed``), or for a built-in network's
    task when ``name`` is ``network/task`` (extracted in ``layout``)."""
    if is_network_task(name):
        network, task = name.split("/", 1)
        tasks = network_tasks(network, layout)
        if task not in tasks:
            raise SystemExit(f"{network} has no task {task!r}; its tasks: {', '.join(tasks)}")
        return tasks[task]
    import tvm
    from omegaconf import OmegaConf
    from tvm.s_tir import meta_schedule as ms

    from metatune.workloads import training_workloads
    from tuner.engine.tasks import TaskInfo

    collect = OmegaConf.load(os.path.join(REPO, "configs", "collect.yaml"))
    by_name = {w.name: w for w in training_workloads(collect.per_kind, collect.seed)}
    if name not in by_name:
        raise SystemExit(f"{name!r} is not a workload of the dataset's generator; choose "
                         f"from: {', '.join(by_name)}")
    wl = by_name[name]
    mod = tvm.IRModule({"main": wl.prim_func()})
    target = tvm.target.Target("llvm")
    return TaskInfo(0, name, float(wl.flops()), 1, ms.ExtractedTask(name, mod, target, [mod], 1))


def run_one(name: str, overrides: list[str], seed: int, trials: int,
            per_round: int | None = None, layout: str = "NCHW") -> dict:
    """``trials`` trials on workload ``name`` in rounds of ``per_round`` (default: one
    round); its best, search seconds and tuning seconds."""
    outcome, rounds, curves, cfg = tune_tasks([workload_task(name, layout)], [
        *overrides, f"trials={trials}", f"trials_per_round={per_round or trials}",
        f"seed={seed}", f"layout={layout}"], prefix="cold-start-")
    return {"workload": name, "seed": seed, "best_ms": outcome.best_ms[0],
            "search_s": sum(r["search_s"] for r in rounds), "trials": outcome.trials_run,
            "rounds": len(rounds), "tuning_seconds": outcome.tuning_seconds,
            **({"layout": layout} if is_network_task(name) else {}),
            "curve": [[c["trial"], c["task_best_ms"]] for c in curves],
            # the model's accuracy on each batch before it was measured (tuner/app/rounds.py)
            "batch_accuracy": [{k: r.get(k) for k in ("trial", "pairwise", "mse_d",
                                                      "novelty", "spread")}
                               for r in rounds],
            "cost_model": cfg.cost_model,
            "checkpoint": cfg.metatune.checkpoint if cfg.cost_model == "metatune" else None,
            "ensemble": cfg.metatune.ensemble if cfg.cost_model == "metatune" else None,
            "xfer_data": cfg.xfer.data if cfg.cost_model == "xgb-xfer" else None}
