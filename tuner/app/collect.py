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
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from typing import Any

from metatune.config import repo_path
from metatune.errors import DatasetSettingsError
from metatune.files import write_json_atomic
from metatune.provenance import machine_info
from metatune.records import (RECORD_FILE, WORKLOAD_FILE, ReadStats, iter_records,
                              read_workload_hashes)
from metatune.workloads import GENERATOR_VERSION, nhwc_workloads, training_workloads
from tuner.app.collect_config import NETWORK_SPLITS, SPLITS, CollectConfig
from tuner.app.config import BuilderConfig, TuneConfig
from tuner.engine.database import (check_database_files, ensure_work_dir,
                                   valid_and_measured_per_task)
from tuner.engine.interrupt import InterruptWatch
from tuner.engine.intrinsics import load_tensor_intrinsics
from tuner.engine.networks import load_network
from tuner.engine.platforms import platform_id
from tuner.engine.runtime import tvm_num_threads
from tuner.engine.targets import resolve_target
from tuner.engine.tasks import Lowering, extract_tasks

logger = logging.getLogger(__name__)

ERROR_FILE = "errors.jsonl"


@dataclass
class Entry:
    """A workload to measure.

    Attributes:
        name: Stable name (``conv2d_c64_h56_o64_k3_s1``, ``resnet-18/fused_conv2d1_add1_relu1``).
        split: one of :data:`tuner.app.collect_config.SPLITS`.
        kind: Workload kind (``conv2d``, ..., ``dense``; held-out: ``network-conv``).
        mod: The ``IRModule`` MetaSchedule tunes.
        samples: Measurements wanted.
        info: Extra description for ``meta.json`` (parameters, FLOPs, networks).
    """

    name: str
    split: str
    kind: str
    mod: Any
    samples: int
    info: dict


def split_layout(split: str) -> str:
    """The data layout of a split's workloads: ``NHWC`` for ``*-nhwc``, else ``NCHW``."""
    return "NHWC" if split.endswith("-nhwc") else "NCHW"


def train_entries(per_kind: int, other_per_kind: int, seed: int, samples: int,
                  target, layout: str = "NCHW") -> list[Entry]:
    """The generated training workloads as entries, each the fused function the tuner's own
    pipeline makes of it (epilogue fused, weights layout-free), as a network's tasks are.
    In ``NHWC``, the workloads of the 2-D kinds only (:func:`metatune.workloads.nhwc_workloads`)."""
    out = []
    split = "train" if layout == "NCHW" else "train-nhwc"
    workloads = (training_workloads if layout == "NCHW" else nhwc_workloads)(
        per_kind, seed, other_per_kind)
    for wl in workloads:
        tasks = extract_tasks(wl.relax_module(), target)
        if len(tasks) != 1:
            raise RuntimeError(f"{wl.name}: fusion gave {len(tasks)} tasks "
                               f"({', '.join(t.name for t in tasks)}), expected one")
        out.append(Entry(wl.name, split, wl.kind, tasks[0].extracted.dispatched[0], samples,
                         {**wl.to_dict(), "flops": tasks[0].flops}))
    return out


def _network(name: str):
    """A built-in network by name, or any ``module:callable`` returning an ``nn.Module``."""
    return load_network(model_spec=name) if ":" in name else load_network(name)


#: The conv tasks already extracted in this process, per (network, target, layout): a
#: collection plans several splits from the same networks (each network split leaves out
#: the held-out and earlier networks' tasks), and extraction takes seconds per network.
_CONV_TASKS: dict[tuple[str, str, str], list[tuple[str, Any, float, int]]] = {}


def conv_tasks(net: str, target, layout: str) -> list[tuple[str, Any, float, int]]:
    """A network's convolution tasks as ``tune.py`` extracts them in ``layout``: per task
    its name, module, FLOPs and structural hash (extracted once per process)."""
    from tvm_ffi import structural_hash

    key = (net, str(target), layout)
    if key not in _CONV_TASKS:
        tasks = extract_tasks(_network(net).relax_mod, target, Lowering(layout=layout))
        _CONV_TASKS[key] = [(t.name, t.extracted.dispatched[0], t.flops,
                             structural_hash(t.extracted.dispatched[0]))
                            for t in tasks if t.is_conv]
    return _CONV_TASKS[key]


def network_entries(networks: tuple[str, ...], target, samples: int, split: str,
                    exclude: Collection[int] = ()) -> list[Entry]:
    """Every distinct convolution task of the networks, as entries: as ``tune.py``
    extracts them in the split's layout (:func:`conv_tasks`).

    Args:
        networks: Built-in network names or ``module:callable`` specs
            (``torchvision.models:googlenet``); a spec's workloads are named by its callable
            (``googlenet/fused_conv2d...``).
        target: The ``tvm.target.Target`` tasks are extracted for.
        samples: Measurements wanted per workload.
        split: ``heldout`` / ``train-networks`` or their ``-nhwc`` twins.
        exclude: Structural hashes of tasks to leave out (a training split leaves out every
            held-out task: :func:`network_hashes`).
    """
    seen: dict[int, Entry] = {}
    for net in networks:
        short = net.rsplit(":", 1)[-1]
        for name, mod, flops, key in conv_tasks(net, target, split_layout(split)):
            if key in exclude:
                continue
            if key in seen:
                seen[key].info["networks"].append(short)
                continue
            seen[key] = Entry(f"{short}/{name}", split, "network-conv", mod, samples,
                              {"flops": flops, "networks": [short]})
    return list(seen.values())


def heldout_entries(networks: tuple[str, ...], target, samples: int,
                    layout: str = "NCHW") -> list[Entry]:
    """Every distinct convolution task of the held-out networks (:func:`network_entries`)."""
    split = "heldout" if layout == "NCHW" else "heldout-nhwc"
    return network_entries(networks, target, samples, split)


def network_hashes(networks: tuple[str, ...], target, layout: str) -> set[int]:
    """The structural hashes of every convolution task of the networks in ``layout``: of
    the held-out networks, what every network training split leaves out, so the held-out
    set stays unseen; of a network split's networks (a superset of what the split holds),
    what the network splits after it leave out."""
    return {key for net in networks for *_, key in conv_tasks(net, target, layout)}


def network_split(split: str) -> str | None:
    """The network training split a split is, or its NHWC twin is (a key of
    :data:`tuner.app.collect_config.NETWORK_SPLITS`), else ``None``."""
    base = split.removesuffix("-nhwc")
    return base if base in NETWORK_SPLITS else None


def plan_split(cfg: CollectConfig, split: str, target) -> list[Entry]:
    """The workloads a split holds, each with the samples wanted.

    A network training split holds the conv tasks of its networks (``train_networks``,
    ``more_networks``, ...: :data:`tuner.app.collect_config.NETWORK_SPLITS`) that no
    held-out network and no network of an earlier network split has.

    Args:
        cfg: The collect configuration.
        split: One of :data:`tuner.app.collect_config.SPLITS`.
        target: The ``tvm.target.Target`` tasks are extracted for.
    """
    layout = split_layout(split)
    if base := network_split(split):
        known = network_hashes(tuple(cfg.networks), target, layout)
        for earlier, key in NETWORK_SPLITS.items():
            if earlier == base:
                break
            known |= network_hashes(tuple(getattr(cfg, key)), target, layout)
        return network_entries(tuple(getattr(cfg, networks_setting(split))), target,
                               cfg.train_networks_samples, split, exclude=known)
    if split.startswith("train"):
        return train_entries(cfg.per_kind, cfg.other_per_kind, cfg.seed, cfg.train_samples,
                             target, layout)
    return heldout_entries(tuple(cfg.networks), target, cfg.heldout_samples, layout)


def unpack(out_dir: str, work_dir: str) -> None:
    """Restore the working copy from the packed ``.json.gz`` files when it is missing."""
    for name in (WORKLOAD_FILE, RECORD_FILE, ERROR_FILE):
        packed, plain = os.path.join(out_dir, name + ".gz"), os.path.join(work_dir, name)
        if not os.path.exists(plain) and os.path.exists(packed):
            with gzip.open(packed, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)


def pack(work_dir: str, out_dir: str) -> None:
    """Compress the working copy into ``out_dir`` (atomically, file by file)."""
    os.makedirs(out_dir, exist_ok=True)
    for name in (WORKLOAD_FILE, RECORD_FILE, ERROR_FILE):
        plain = os.path.join(work_dir, name)
        if not os.path.exists(plain):
            continue
        tmp = os.path.join(out_dir, name + ".gz.tmp")
        with open(plain, "rb") as src, gzip.GzipFile(tmp, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        os.replace(tmp, os.path.join(out_dir, name + ".gz"))


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


def split_settings(settings: dict[str, Any], split: str) -> dict[str, Any]:
    """A split's measurement settings: an NHWC split records its layout too (the NCHW
    splits, collected before layouts were a choice, record none)."""
    return {**settings, "layout": "NHWC"} if split_layout(split) == "NHWC" else settings


def read_meta(split_dir: str) -> dict[str, Any] | None:
    """A split's ``meta.json`` (:func:`write_meta`), or ``None`` where it has none yet."""
    path = os.path.join(split_dir, "meta.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_settings(split_dir: str, settings: dict[str, Any]) -> None:
    """Refuse to add samples to a split measured under other settings.

    Raises:
        DatasetSettingsError: What differs, and where to collect instead.
    """
    if (meta := read_meta(split_dir)) is None:
        return
    recorded = meta.get("settings")
    hint = ("collect into another out= directory (datasets are kept per platform, "
            "data/<target>-<cpu>), or move this one away to start over")
    if recorded is None:
        raise DatasetSettingsError(f"{split_dir} records no measurement settings (a dataset "
                                   f"from before they were recorded); {hint}")
    diffs = [f"{k}: {recorded.get(k)!r} there, {v!r} now" for k, v in settings.items()
             if recorded.get(k) != v]
    if diffs:
        raise DatasetSettingsError(f"{split_dir} was measured with other settings "
                                   f"({'; '.join(diffs)}); {hint}")


def networks_setting(split: str) -> str | None:
    """The setting naming the networks whose conv tasks a split holds (``networks`` for the
    held-out splits, ``train_networks``, ... for the network training splits), else ``None``
    (generated workloads)."""
    if base := network_split(split):
        return NETWORK_SPLITS[base]
    return "networks" if split.startswith("heldout") else None


def _measured_any(split_dir: str, work_dir: str) -> bool:
    """Whether a split holds any measurement, packed (``split_dir``) or in its working
    copy (``work_dir``: the round in flight when a run stopped)."""
    packed = os.path.join(split_dir, RECORD_FILE + ".gz")
    if os.path.exists(packed):
        with gzip.open(packed, "rt", encoding="utf-8") as f:
            if any(line.strip() for line in f):
                return True
    plain = os.path.join(work_dir, RECORD_FILE)
    return os.path.exists(plain) and os.path.getsize(plain) > 0


def check_networks(cfg: CollectConfig, split: str) -> None:
    """Refuse to resume a split without networks it was collected from (their workloads
    would drop out of its ``meta.json``); adding networks is logged. A split begun but
    with nothing measured yet takes this run's networks.

    Raises:
        DatasetSettingsError: The networks left out, and how to go on.
    """
    split_dir = os.path.join(cfg.out, split)
    if not (key := networks_setting(split)) or (meta := read_meta(split_dir)) is None:
        return
    if (recorded := meta.get("networks")) is None:  # collected before they were recorded
        return
    if not _measured_any(split_dir, os.path.join(cfg.work_dir or "", split)):
        return  # begun, nothing measured: this run's networks replace the recorded ones
    networks = getattr(cfg, key)
    if missing := [n for n in recorded if n not in networks]:
        raise DatasetSettingsError(
            f"{split_dir} was collected from {', '.join(missing)} too, which "
            f"{key}= now leaves out: add {'it' if len(missing) == 1 else 'them'} back, or "
            "collect into another out= directory")
    if added := [n for n in networks if n not in recorded]:
        logger.info("%s: adding the conv tasks of %s", split_dir, ", ".join(added))


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
    from tuner.app.tuning import build_session

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

    from tuner.app.tuning import task_loggers

    work = os.path.join(cfg.work_dir, split)
    out = os.path.join(cfg.out, split)
    ensure_work_dir(work)
    unpack(out, work)
    check_database_files(work, repair=True)  # a kill can tear the last line
    database = ms.database.JSONDatabase(work_dir=work)
    counts = valid_and_measured_per_task(database, [e.mod for e in entries])
    bar = tqdm(total=sum(e.samples for e in entries),
               initial=sum(min(v, e.samples) for (v, _), e in zip(counts, entries)),
               desc=f"collect {split}", unit="sample", disable=not cfg.progress,
               dynamic_ncols=True)

    def save() -> None:
        pack(work, out)
        write_meta(cfg, split, entries, info=info, machine=machine_info(), settings=settings)

    save()
    for entry, (valid, measured) in zip(entries, counts):
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
        session: The :class:`tuner.app.tuning.Session` measuring.
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


def write_meta(cfg: CollectConfig, split: str, entries: list[Entry], *, info, machine: dict,
               settings: dict) -> None:
    """Write ``<out>/<split>/meta.json``: what each workload is, where and how measured.

    Args:
        cfg: The collect configuration.
        split: one of :data:`tuner.app.collect_config.SPLITS`.
        entries: The split's workloads.
        info: The resolved target.
        machine: :func:`metatune.provenance.machine_info` (now).
        settings: :func:`measurement_settings` (checked against the file's before).
    """
    from tvm_ffi import structural_hash

    out = os.path.join(cfg.out, split)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "meta.json")
    created = (read_meta(out) or {}).get("created", machine["date"])
    meta = {
        "split": split,
        **({"networks": list(getattr(cfg, key))} if (key := networks_setting(split)) else {}),
        "target": str(info.target),
        "target_description": info.description,
        "machine": machine,
        "settings": settings,
        "created": created,
        "updated": machine["date"],
        "command": "python " + " ".join(sys.argv),
        "sampling": "random traces of MetaSchedule's post-order-apply design space "
                    "(ReplayTrace), LocalRunner "
                    f"number={cfg.runner.number} repeat={cfg.runner.repeat} "
                    f"min_repeat_ms={cfg.runner.min_repeat_ms}; generated workloads "
                    "fused by the tuner's own pipeline (epilogue, layout-free weights)",
        "workloads": [{"name": e.name, "kind": e.kind, "samples": e.samples,
                       "shash": str(structural_hash(e.mod)), **e.info} for e in entries],
    }
    write_json_atomic(path, meta, indent=1)


def summarize(out_dir: str, work_dir: str | None = None) -> dict[str, Any]:
    """Workloads and valid samples per split and per kind (reads without TVM).

    Args:
        out_dir: The packed dataset directory (``<out>/<split>/...``).
        work_dir: Read the (fresher) working copy instead where it exists.
    """
    summary: dict[str, Any] = {}
    for split in SPLITS:
        if (meta := read_meta(os.path.join(out_dir, split))) is None:
            continue
        src = os.path.join(out_dir, split)
        if work_dir and os.path.exists(os.path.join(work_dir, split, RECORD_FILE)):
            src = os.path.join(work_dir, split)
        by_hash = {w["shash"]: w for w in meta["workloads"]}
        valid: dict[str, int] = {w["name"]: 0 for w in meta["workloads"]}
        failed: dict[str, int] = dict(valid)
        stats = ReadStats()
        try:
            hashes = read_workload_hashes(src)
            for rec in iter_records(src, stats):
                wl = by_hash.get(hashes[rec.workload] if rec.workload < len(hashes) else "")
                if wl is None:
                    continue
                (valid if rec.valid else failed)[wl["name"]] += 1
        except FileNotFoundError:
            pass
        kinds: dict[str, dict[str, int]] = {}
        for w in meta["workloads"]:
            k = kinds.setdefault(w["kind"], {"workloads": 0, "valid_samples": 0,
                                             "failed_samples": 0, "complete_workloads": 0})
            k["workloads"] += 1
            k["valid_samples"] += valid[w["name"]]
            k["failed_samples"] += failed[w["name"]]
            k["complete_workloads"] += int(valid[w["name"]] + failed[w["name"]] >= w["samples"])
        summary[split] = {
            "workloads": len(meta["workloads"]),
            "valid_samples": sum(valid.values()),
            "failed_samples": sum(failed.values()),
            "corrupt_lines": stats.corrupt,
            "min_valid_per_workload": min(valid.values()) if valid else 0,
            "per_kind": kinds,
            "target": meta["target_description"],
            "updated": meta["updated"],
        }
    return summary


def write_summary(out_dir: str) -> dict[str, Any]:
    """:func:`summarize` the dataset and keep it beside its splits (``summary.json``).

    Args:
        out_dir: The packed dataset directory.

    Returns:
        The summary written.
    """
    summary = summarize(out_dir)
    path = os.path.join(out_dir, "summary.json")
    write_json_atomic(path, summary, indent=2, newline=True)
    return summary


def summarize_all(data_root: str) -> dict[str, Any]:
    """:func:`summarize` of every dataset under ``data_root`` (``data/``), by directory name."""
    names = sorted(d for d in os.listdir(data_root)
                   if any(os.path.exists(os.path.join(data_root, d, split, "meta.json"))
                          for split in SPLITS)) if os.path.isdir(data_root) else []
    return {name: summarize(os.path.join(data_root, name)) for name in names}
