"""Collect the measured dataset: random schedules of many workloads, measured for real.

For each workload, random traces are drawn from MetaSchedule's design space
(``ReplayTrace``), built and run with the persistent builder and LocalRunner, and stored in
a MetaSchedule JSON database per split (``train``: generated workloads; ``heldout``: the
conv tasks of the four networks, never used for training; ``train-nhwc`` and
``heldout-nhwc``: the same in NHWC, ``tune.py``'s default layout, the training split for
the 2-D kinds only; ``train-networks`` and ``train-networks-nhwc``: the conv tasks of other
networks, every task of a held-out network left out; ``train-more-networks`` and its NHWC
twin: those of still other networks, every held-out and ``train-networks`` task left
out; ``train-mobile-networks``: those of mobile networks, every task of the splits before
left out). The working copy lives in
``work_dir``; after every workload it is packed as ``.json.gz`` into ``out`` with a
``meta.json`` saying what, where and when. Killing the collector at any moment loses at
most the round in flight; rerunning it unpacks, repairs a torn last line, and continues
with a fresh random stream, so nothing is measured twice on purpose.

This module runs the measurements; what each split holds is planned in
:mod:`tuner.app.collect_plan`, the dataset's files and their checks are
:mod:`tuner.app.collect_dataset`'s, its summary :mod:`tuner.app.collect_summary`'s.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import asdict, replace
from typing import Any

from metatune.config import repo_path
from metatune.provenance import machine_info
from metatune.workloads import GENERATOR_VERSION
from tuner.app.collect_config import CollectConfig
from tuner.app.collect_dataset import (
    ERROR_FILE,
    check_networks,
    check_settings,
    pack,
    split_settings,
    unpack,
    write_meta,
)
from tuner.app.collect_plan import Entry, conv_tasks, network_entries, network_hashes, plan_split
from tuner.app.collect_summary import summarize, summarize_all, write_summary
from tuner.app.config import BuilderConfig, TuneConfig
from tuner.engine.database import check_database_files, ensure_work_dir, valid_and_measured_per_task
from tuner.engine.interrupt import InterruptWatch
from tuner.engine.intrinsics import load_tensor_intrinsics
from tuner.engine.platforms import platform_id
from tuner.engine.runtime import tvm_num_threads
from tuner.engine.targets import resolve_target

__all__ = ["check_networks", "conv_tasks", "network_entries", "network_hashes", "plan_split",
           "resolve_paths", "run_collect", "session_config", "summarize", "summarize_all"]

logger = logging.getLogger(__name__)


def _file_safe(name: str) -> str:
    """A workload name usable in a file name (held-out names contain ``/``)."""
    return name.replace("/", "__")


def _stream_seed(seed: int, name: str, done: int) -> int:
    """A random state unique to (seed, workload, samples already measured)."""
    digest = hashlib.sha256(f"{seed}/{name}/{done}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def measurement_settings(cfg: CollectConfig, info, machine: dict[str, Any]) -> dict[str, Any]:
    """What decides a dataset's run times: samples measured under other settings do not mix.

    Args:
        cfg: The collect configuration.
        info: The resolved target.
        machine: :func:`metatune.provenance.machine_info`.
    """
    runner = asdict(session_config(cfg).runner)
    return {
        "target": str(info.target),
        "cpu": machine["cpu"],
        "cpu_flags": machine["cpu_flags"],
        "cores": info.num_cores,
        "tvm_threads": tvm_num_threads(),
        "tvm": machine["tvm"],
        "runner": {k: runner[k] for k in ("number", "repeat", "min_repeat_ms",
                                          "enable_cpu_cache_flush")},
        "pack_weights": True,
        "workload_generator": GENERATOR_VERSION,
    }


def resolve_paths(cfg: CollectConfig, info) -> CollectConfig:
    """``out`` and ``work_dir`` left ``None`` become ``data/<dataset id>`` and
    ``work/collect/<dataset id>`` in the repository: one dataset per platform
    (:func:`tuner.engine.platforms.platform_id`)."""
    ds = platform_id(info.target)
    return replace(cfg, out=cfg.out or repo_path("data", ds),
                   work_dir=cfg.work_dir or repo_path("work", "collect", ds))


def run_collect(cfg: CollectConfig) -> dict[str, Any]:
    """Measure every planned workload up to its sample count (resumable).

    Args:
        cfg: The configuration (:func:`tuner.app.collect_config.load_collect_config`).

    Returns:
        The dataset summary (see :func:`summarize`).
    """
    # This imports TVM: lazy, so that ``collect.py summary`` runs without it.
    from tuner.app.session import build_session

    info = resolve_target(cfg.target, cfg.num_cores)
    cfg = resolve_paths(cfg, info)
    load_tensor_intrinsics((info.kind,))
    settings = measurement_settings(cfg, info, machine_info())
    for split in cfg.splits:  # before anything is measured
        check_settings(os.path.join(cfg.out, split), split_settings(settings, split))
        check_networks(cfg, split)
    logger.info("collecting into %s (%s, TVM %d threads)", cfg.out, info.description,
                settings["tvm_threads"])
    plans = {split: plan_split(cfg, split, info.target) for split in cfg.splits}
    if cfg.limit:
        plans = {k: v[: cfg.limit] for k, v in plans.items()}

    session = build_session(session_config(cfg), info)
    try:
        with InterruptWatch() as watch:
            for split, entries in plans.items():
                _collect_split(cfg, split, entries, session=session, info=info,
                               settings=split_settings(settings, split), watch=watch)
    except RuntimeError:
        if watch.seen:  # Ctrl-C inside TVM's C++ arrives as a RuntimeError
            raise KeyboardInterrupt from None
        raise
    finally:
        session.close()
    return write_summary(cfg.out)


def _collect_split(cfg: CollectConfig, split: str, entries: list[Entry], *, session, info,
                   settings: dict[str, Any], watch: InterruptWatch) -> None:
    """Measure one split's workloads up to their sample counts, packing after each one.

    A workload on which TVM's search itself fails (a TVM error, not a failed candidate)
    keeps what it measured and is skipped, logged; Ctrl-C (``watch``) still stops.
    """
    from tqdm.auto import tqdm
    from tvm.s_tir import meta_schedule as ms

    from tuner.app.session import task_loggers

    work = os.path.join(cfg.work_dir, split)
    out = os.path.join(cfg.out, split)
    ensure_work_dir(work)
    unpack(out, work)
    check_database_files(work, repair=True)  # a kill can tear the last line
    database = ms.database.JSONDatabase(work_dir=work)
    counts = valid_and_measured_per_task(database, [e.mod for e in entries])
    bar = tqdm(total=sum(e.samples for e in entries),
               initial=sum(min(v, e.samples) for (v, _), e in zip(counts, entries, strict=False)),
               desc=f"collect {split}", unit="sample", disable=not cfg.progress,
               dynamic_ncols=True)

    def save() -> None:
        pack(work, out)
        write_meta(cfg, split, entries, info=info, machine=machine_info(), settings=settings)

    save()
    for entry, (valid, measured) in zip(entries, counts, strict=False):
        # failed samples are kept but do not count: measure until enough are valid,
        # giving up after twice the wanted number of attempts
        start, first = time.perf_counter(), measured
        while valid < entry.samples and measured < 2 * entry.samples:
            bar.set_postfix_str(entry.name)
            try:
                _measure(entry, remaining=min(entry.samples - valid,
                                              2 * entry.samples - measured),
                         have=measured, session=session, database=database, work=work,
                         cfg=cfg, bar=bar,
                         task_logger=task_loggers(work, [_file_safe(entry.name)])[0])
            except RuntimeError as err:  # TVM's search failed on this design space
                if watch.seen:
                    raise KeyboardInterrupt from None
                logger.warning("%s: TVM's search failed (%s): skipped with %d valid samples; "
                               "the rest of the split goes on", entry.name,
                               str(err).strip().splitlines()[-1][:160], valid)
                break
            before = measured
            (valid, measured), = valid_and_measured_per_task(database, [entry.mod])
            if measured == before:  # the design space has nothing new left
                break
        if measured > first:
            seconds = time.perf_counter() - start
            logger.info("%s: %d samples in %.0f s (%.0f samples/min), %d valid", entry.name,
                        measured - first, seconds, 60 * (measured - first) / seconds, valid)
            save()  # only when something new was measured
    bar.close()
    save()


def session_config(cfg: CollectConfig) -> TuneConfig:
    """The tuning session the collector measures with: random traces of the design space
    (``replay``, never a schedule twice), no cost model to speak of (``random``), a builder
    per core and the collect config's runner without cache flushing."""
    return TuneConfig(cost_model="random", search="replay", seed=cfg.seed,
                      builder=BuilderConfig(timeout_sec=cfg.builder_timeout_sec),
                      runner=replace(cfg.runner, enable_cpu_cache_flush=False))


def _measure(entry: Entry, *, remaining: int, have: int, session, database, work: str,
             cfg: CollectConfig, bar, task_logger) -> None:
    """Measure ``remaining`` random candidates of one workload into ``database``.

    Args:
        entry: The workload.
        remaining: Candidates to measure.
        have: Candidates measured before (seeds this call's random stream).
        session: The :class:`tuner.app.session.Session` measuring.
        database: The split's MetaSchedule database.
        work: The split's work dir (its error log goes there).
        cfg: The collect configuration.
        bar: The progress bar, advanced per valid sample.
        task_logger: MetaSchedule's logger for this workload.
    """
    from tvm.s_tir import meta_schedule as ms

    from tuner.app.monitor import ErrorLogCallback

    log = ErrorLogCallback(path=os.path.join(work, ERROR_FILE), workload=entry.name,
                           on_valid=bar.update)
    ctx = ms.TuneContext(
        mod=entry.mod, target=session.target.target, space_generator="post-order-apply",
        search_strategy=session.search.clone(), task_name=_file_safe(entry.name),
        logger=task_logger, rand_state=_stream_seed(cfg.seed, entry.name, have),
        num_threads=session.target.num_cores)
    ms.tune_tasks(
        tasks=[ctx], task_weights=[1.0], work_dir=work, max_trials_global=remaining,
        num_trials_per_iter=min(remaining, cfg.trials_per_round), builder=session.builder,
        runner=session.runner, database=database, cost_model=session.cost_model,
        measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), log])
