"""``run_tune(cfg)``: tune a network, compile it, check it and report its latency."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from metatune.config import repo_path
from metatune.errors import register_ffi_errors
from tuner.app.artifact import check_out_path
from tuner.app.artifact_timing import loaded_on
from tuner.app.checkpoints import checkpoint_note
from tuner.app.config import EvaluateConfig, TuneConfig, with_round_budget
from tuner.app.export import export_run
from tuner.app.memory_run import RunMemory
from tuner.app.preflight import check_inputs, check_resume, with_model_sources
from tuner.app.report import build_report, format_report, plot_curves, write_report
from tuner.app.tuning import tune
from tuner.engine.database import open_database
from tuner.engine.evaluate import CompiledNetwork, build_network, build_untuned, check_output
from tuner.engine.networks import load_network
from tuner.engine.precision import check_precision, rtol_for
from tuner.engine.remote import rpc_where
from tuner.engine.rpc import RPCSettings
from tuner.engine.runtime import runtime_info
from tuner.engine.targets import is_cross, resolve_target
from tuner.engine.tasks import Lowering, extract_tasks, format_task_table
from tuner.engine.timing import interleaved, torch_timer
from tuner.engine.workdir_lock import claimed_work_dir
from tuner.search.zero_shot import with_predictions

logger = logging.getLogger("metatune")


def setup_logging(level: str) -> None:
    """Log MetaTune messages to stderr at ``level``."""
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")


def default_work_dir(cfg: TuneConfig, network_name: str) -> str:
    """The configured ``work_dir`` (absolute already), else ``work/<network>`` in the
    repository."""
    if cfg.work_dir:
        return cfg.work_dir
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in network_name)
    return repo_path("work", safe)


def _network_label(cfg: TuneConfig) -> str:
    if cfg.onnx:
        return os.path.splitext(os.path.basename(cfg.onnx))[0]
    return cfg.model or cfg.network or "network"


def run_tune(cfg: TuneConfig) -> dict[str, Any]:
    """Tune every task of a network with MetaSchedule, then compile and measure it.

    Every input is checked before the work dir is made or touched: the configuration, the
    target, the checkpoints, the RPC tracker, then the network itself (imported, its tasks
    extracted) and, for a work dir that exists, whether its measurements may be resumed. A
    refused run leaves nothing behind (a work dir it made is removed again while it holds no
    measurement).

    Args:
        cfg: A configuration from :func:`tuner.app.config.load_tune_config` (validated
            when it was made).

    Returns:
        The report (also written to ``<work_dir>/report.json``).

    Raises:
        metatune.errors.MetaTuneError: Any bad input, with a message saying what to do.
    """
    setup_logging(cfg.log_level)
    register_ffi_errors()  # errors raised in callbacks TVM's C++ calls keep their type
    target_info = resolve_target(cfg.target, cfg.num_cores)
    if note := checkpoint_note(cfg.cost_model, cfg.metatune, target_info.target):
        logger.info("%s", note)  # which checkpoint, and why: named, this CPU's or the fallback
    cfg = with_model_sources(cfg, target_info)  # the report names the checkpoint and data
    check_inputs(cfg, target_info)  # before anything slow, and before the work dir exists
    check_precision(cfg.precision, cfg.layout, target_info.target)  # bf16: the CPU has it
    if cfg.export:  # an export path in the way is refused before tuning, not after
        check_out_path(cfg.export, cfg.export_overwrite)
    work_dir = default_work_dir(cfg, _network_label(cfg))
    if os.path.isdir(work_dir):  # refuse a mismatched resume before the slow import
        check_resume(work_dir, cfg, target_info, record=False)
    network = load_network(
        cfg.network, onnx_path=cfg.onnx, model_spec=cfg.model,
        input_shape=tuple(cfg.input_shape) if cfg.input_shape else None,
        batch=cfg.batch, fold_bn=cfg.fold_bn)
    for note in network.notes:
        logger.info("%s: %s", network.name, note)
    lowering = Lowering(pack_weights=cfg.pack_weights, layout=cfg.layout,
                        precision=cfg.precision)
    tasks = extract_tasks(network.relax_mod, target_info.target, lowering)
    if cfg.rounds_per_task is not None:
        cfg = with_round_budget(cfg, len(tasks))
        logger.info("budget: %d rounds x %d trials x %d tasks = %d trials",
                    cfg.rounds_per_task, cfg.trials_per_round, len(tasks), cfg.trials)
    with claimed_work_dir(work_dir):
        check_resume(work_dir, cfg, target_info)
        database = open_database(work_dir, repair=cfg.repair_db)
        logger.info("target %s, work dir %s", target_info.description, work_dir)
        print(format_task_table(tasks), flush=True)
        memory = RunMemory.open(cfg, target_info, tasks, database, work_dir)
        try:
            return _tune_and_report(cfg, target_info, work_dir, network, tasks, lowering,
                                    database, memory)
        finally:
            if memory is not None:  # a failed run's claims go too
                memory.release()


def _tune_and_report(cfg: TuneConfig, target_info, work_dir: str, network, tasks,
                     lowering: Lowering, database, memory=None) -> dict[str, Any]:
    """:func:`run_tune` once the inputs are checked and the work dir is locked."""
    writer = None
    if cfg.tensorboard:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=os.path.join(work_dir, "tensorboard"))
    try:
        outcome = tune(tasks, target_info=target_info, database=database, cfg=cfg,
                       work_dir=work_dir, writer=writer, memory=memory)
    finally:
        if writer is not None:
            writer.close()

    report = build_report(cfg=cfg, network=network, tasks=tasks, target_info=target_info,
                          outcome=outcome, database=database, work_dir=work_dir)
    write_report(work_dir, report)  # the tuning part stands even if evaluation fails
    if cfg.evaluate.enabled:
        rpc = cfg.runner.rpc if cfg.evaluate.where(cfg.runner) == "rpc" else None
        evaluate_into(report, network=network, target_info=target_info,
                      database=with_predictions(database, work_dir), ecfg=cfg.evaluate,
                      lowering=lowering, rpc=rpc)
        report["runtime"] = runtime_info(target_info.num_cores)
        write_report(work_dir, report)
    png = plot_curves(work_dir, f"{network.name} on {target_info.description}")
    print(format_report(report), flush=True)
    logger.info("report: %s%s", os.path.join(work_dir, "report.json"),
                f", curves: {png}" if png else "")
    if cfg.export:
        export_run(cfg.export, report=report, network=network, target_info=target_info,
                   database=with_predictions(database, work_dir), lowering=lowering,
                   work_dir=work_dir, overwrite=cfg.export_overwrite,
                   rtol=cfg.evaluate.rtol if cfg.evaluate.check else None)
    return report


def evaluate_into(report: dict[str, Any], *, network, target_info, database,
                  ecfg: EvaluateConfig, lowering: Lowering = Lowering(),
                  rpc: RPCSettings | None = None) -> None:
    """Compile, check and time the network; fill ``report['latency_ms']`` in place.

    ``lowering`` must be the one the tasks were extracted with. With ``rpc``, each build
    is uploaded to a server behind that tracker and checked and timed there, in the same
    windows and rounds (:func:`tuner.app.artifact_timing.loaded_on`); PyTorch, which runs
    here, is not timed then. ``report['timing']['where']`` says where it was timed.
    """
    if rpc is None:
        _evaluate(report, network, target_info, database, ecfg, lowering, "local",
                  lambda executable: CompiledNetwork(executable, target_info.device_type))
        return
    with loaded_on(rpc, target_info.device_type, cross=is_cross(target_info.target)) as load:
        _evaluate(report, network, target_info, database, ecfg, lowering, rpc_where(rpc), load)


def _evaluate(report: dict[str, Any], network, target_info, database, ecfg: EvaluateConfig,
              lowering: Lowering, where: str, load) -> None:
    """:func:`evaluate_into` with ``load(executable)`` giving a network to run and time."""
    x = network.example_input()
    start = time.perf_counter()
    tuned = load(build_network(network.relax_mod, target_info.target, database, lowering))
    logger.info("compiled and loaded the tuned network in %.1f s (%s)",
                time.perf_counter() - start, where)
    if ecfg.check:
        report["check_rtol"] = rtol_for(lowering.precision, ecfg.rtol)
        report["check_error"] = check_output(tuned.run(x), network.reference(x),
                                             report["check_rtol"])
    timers = {"tuned": tuned.timer(x)}
    if (ecfg.torch and where == "local" and network.torch_module is not None
            and target_info.device_type == "cpu"):
        timers["torch"] = torch_timer(network.torch_module, x, target_info.num_cores)
        if ecfg.torch_compile:
            timers["torch_compile"] = torch_timer(network.torch_module, x,
                                                  target_info.num_cores, compile=True)
    # side by side in alternating rounds: timings minutes apart drift by up to 30 %
    latency = interleaved(timers, ecfg.repeat, ecfg.min_repeat_ms, ecfg.rounds)
    report["latency_ms"].update({name: lat.median_ms for name, lat in latency.items()})
    report["latency_windows_ms"] = {name: lat.runs_ms for name, lat in latency.items()}
    report["timing"] = {"rounds": ecfg.rounds, "windows": len(latency["tuned"].runs_ms),
                        "min_window_ms": ecfg.min_repeat_ms, "order": "alternating",
                        "warm_call": True, "where": where}
    close = getattr(tuned, "close", None)
    if close is not None:  # a remote build's session ends before the next one asks
        timers.clear()
        close()
    if ecfg.untuned:  # slow (no schedules at all): timed apart, after the others
        untuned = load(build_untuned(network.relax_mod, target_info.target))
        report["latency_ms"]["untuned"] = untuned.time(x, ecfg.untuned_repeat, 0).median_ms
        if (close := getattr(untuned, "close", None)) is not None:
            close()
