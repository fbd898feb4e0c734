"""Measured records -> loop-nest graphs with per-workload normalized targets.

Target: a candidate's throughput relative to the best measured candidate of its
workload, ``y = best_seconds / seconds`` in (0, 1] (higher is better). It is scale-free,
so workloads of very different sizes share one regression problem, and it is what the
tuner needs: a ranking within a workload. Failed measurements are left out.

Graphs are built by replaying each record's trace on its workload (TVM is needed here,
as for any TIR reading) and cached under ``cache_dir`` keyed by the data files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field

import torch

from metatune.errors import ConfigError
from metatune.graph import encode
from metatune.records import RECORD_FILE, ReadStats, iter_records, read_meta, read_workload_json

logger = logging.getLogger(__name__)


@dataclass
class WorkloadSamples:
    """The measured candidates of one workload.

    Attributes:
        name: Workload name (``meta.json``).
        kind: Workload kind (``conv2d``, ..., ``dense``, ``network-conv``).
        graphs: PyG ``Data`` graphs; each has ``y`` (a 1-element tensor, the target) and
            ``seconds`` (the measured mean run time).
    """

    name: str
    kind: str
    graphs: list = field(default_factory=list)


#: How meta-training's episodic targets are normalized
#: (:class:`datamodules.graphs.EpisodeDataset`): relative to the workload's best over all
#: its samples, or to the best of the task's support samples (as the tuner sees a task).
EPISODE_TARGETS = ("workload", "support")


def relative_throughput(seconds: list[float]) -> list[float]:
    """``best / s`` for each run time ``s``: 1.0 for the best candidate."""
    best = min(seconds)
    return [best / s for s in seconds]


def split_fingerprint(split_dir: str, salt: str = "", with_mtime: bool = False) -> str:
    """A cache key of a split's files: their names and sizes (and modification times with
    ``with_mtime``), and ``salt`` (what the cache holds of them, e.g. a graph mode)."""
    h = hashlib.sha256(salt.encode())
    for name in sorted(os.listdir(split_dir)):
        st = os.stat(os.path.join(split_dir, name))
        h.update(f"{name}:{st.st_size}".encode())
        if with_mtime:
            h.update(f":{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


def load_split(split_dir: str, mode: str, cache_dir: str | None = None,
               min_samples: int = 2) -> list[WorkloadSamples]:
    """Load one split of the dataset as graphs.

    Args:
        split_dir: ``data/<target>/<split>`` with ``meta.json`` and the database files.
        mode: Graph mode, ``"super"`` or ``"plain"``.
        cache_dir: Where to cache the encoded graphs (``None``: no cache).
        min_samples: Workloads with fewer valid samples are skipped.

    Returns:
        The workloads with their graphs, in ``meta.json`` order.

    Raises:
        FileNotFoundError: ``split_dir`` has no ``meta.json``.
    """
    meta_path = os.path.join(split_dir, "meta.json")
    if not os.path.exists(meta_path):
        raise FileNotFoundError(
            f"{meta_path} not found: collect the dataset first (python collect.py run)")
    cache = None
    if cache_dir:
        os.makedirs(cache_dir, exist_ok=True)
        key = split_fingerprint(split_dir, f"{mode}:{CACHE_FORMAT}", with_mtime=True)
        cache = os.path.join(cache_dir, f"{os.path.basename(split_dir)}-{mode}-{key}.pt")
        if os.path.exists(cache):
            cached = _read_cache(cache)
            if cached is not None:
                logger.info("%s: %s graphs of %d workloads from the cache %s", split_dir, mode,
                            len(cached), cache)
                return cached
    out = _encode_split(split_dir, mode, min_samples)
    if cache:
        _write_cache(cache, out)
    return out


#: The encoded-graph cache's format: plain data only (workloads as dicts, each graph as a
#: dict of tensors), read with ``weights_only=True``; a new format gets new cache files.
CACHE_FORMAT = "graphs-v2"


def _write_cache(path: str, workloads: list[WorkloadSamples]) -> None:
    """Save ``workloads`` as plain data (:data:`CACHE_FORMAT`), whole or not at all
    (through ``<path>.<pid>.tmp`` and a rename)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    torch.save({"format": CACHE_FORMAT,
                "workloads": [{"name": w.name, "kind": w.kind,
                               "graphs": [g.to_dict() for g in w.graphs]} for w in workloads]},
               tmp)
    os.replace(tmp, path)


def _read_cache(path: str) -> list[WorkloadSamples] | None:
    """The workloads in a cache file, or ``None`` (with a one-line warning) when it cannot be
    read as one: anything but tensors and plain data is refused unread
    (:func:`metatune.safe_load.load_tensors`), and the split is encoded again."""
    from torch_geometric.data import Data

    from metatune.safe_load import load_error, load_tensors

    try:
        blob = load_tensors(path)
        if not isinstance(blob, dict) or blob.get("format") != CACHE_FORMAT:
            raise ValueError(f"not a {CACHE_FORMAT} cache")
        return [WorkloadSamples(w["name"], w["kind"], [Data.from_dict(g) for g in w["graphs"]])
                for w in blob["workloads"]]
    except Exception as err:  # torch raises many types on a bad file
        logger.warning("encoded-graph cache %s not used (%s); encoding the split again",
                       path, load_error(err))
        return None


def workload_entries(split_dir: str) -> list[tuple[dict | None, list | None]]:
    """The database's workloads in file order (a record's ``workload`` index is a position
    here), each with its ``meta.json`` entry: ``(info, workload JSON)``; ``info`` is ``None``
    for a workload ``meta.json`` does not list, both are ``None`` for a corrupt line."""
    by_hash = {w["shash"]: w for w in workload_order(split_dir)}
    return [(by_hash.get(str(entry[0])), entry) if entry else (None, None)
            for entry in read_workload_json(split_dir)]


@dataclass
class Replayed:
    """One valid measured record, replayed on its workload.

    Attributes:
        info: The workload's ``meta.json`` entry (``name``, ``kind``, ``shash``, ...).
        workload: The MetaSchedule ``Workload``.
        sch: The ``tvm.s_tir.Schedule`` after replaying the record's trace.
        seconds: The measured mean run time.
    """

    info: dict
    workload: object
    sch: object
    seconds: float


def iter_replayed(split_dir: str, names: Collection[str] | None = None,
                  on_record: Callable[[], None] | None = None) -> Iterator[Replayed]:
    """Replay every valid record of a split on its workload, in file order.

    Corrupt lines and traces that no longer replay are skipped with a warning, counted.

    Args:
        split_dir: ``data/<target>/<split>`` with ``meta.json`` and the database files.
        names: Replay only the records of these workloads (default: all); the others are
            skipped before their traces are replayed, which is where the time goes.
        on_record: Called once for every record read (a progress bar's step).
    """
    from tvm.s_tir import Schedule
    from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

    workloads: dict[int, tuple] = {}
    for i, (info, entry) in enumerate(workload_entries(split_dir)):
        if info is not None and (names is None or info["name"] in names):
            workloads[i] = (info, Workload.from_json(entry))
    stats = ReadStats()
    skipped = 0
    for rec in iter_records(split_dir, stats):
        if on_record is not None:
            on_record()
        if not rec.valid or rec.workload not in workloads:
            continue
        info, workload = workloads[rec.workload]
        try:
            record = TuningRecord.from_json(rec.raw, workload)
            sch = Schedule(workload.mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
        except Exception as err:  # a trace that does not replay is skipped, counted
            skipped += 1
            logger.warning("%s line %d: record skipped (%s)", split_dir, rec.line,
                           str(err).splitlines()[-1][:120])
            continue
        yield Replayed(info, workload, sch, rec.mean_seconds)
    if stats.corrupt or skipped:
        logger.warning("%s: %d corrupt and %d unreplayable records skipped", split_dir,
                       stats.corrupt, skipped)


def dataset_platform(split_dir: str) -> dict:
    """Where a split was measured: ``target``, ``cpu``, ``cpu_flags`` (from its ``meta.json``;
    empty when it has none)."""
    meta = read_meta(split_dir)
    if meta is None:
        return {}
    settings = meta.get("settings") or {}
    machine = meta.get("machine") or {}
    return {"target": settings.get("target", meta.get("target")),
            "cpu": settings.get("cpu", machine.get("cpu")),
            "cpu_flags": settings.get("cpu_flags", machine.get("cpu_flags"))}


def dataset_layout(split_dir: str) -> str:
    """The data layout a split's 2-D convolutions were measured in: ``NHWC`` when its
    ``meta.json`` settings say so (the ``*-nhwc`` splits), else ``NCHW``."""
    return ((read_meta(split_dir) or {}).get("settings") or {}).get("layout", "NCHW")


def as_split_dirs(split_dirs: str | Sequence[str]) -> list[str]:
    """One split directory or several, as a list."""
    return [split_dirs] if isinstance(split_dirs, str) else list(split_dirs)


def workload_order(split_dir: str) -> list[dict]:
    """The workloads of a split as listed in its ``meta.json``."""
    with open(os.path.join(split_dir, "meta.json"), encoding="utf-8") as f:
        return json.load(f)["workloads"]


def network_workloads(split_dirs: list[str],
                      networks: Collection[str]) -> tuple[list[str], list[str]]:
    """The workloads of these splits that any of ``networks`` uses (``meta.json``'s
    ``networks`` of each entry: a workload several networks share belongs to each of them),
    in ``meta.json`` order, and every network the splits have (sorted), so that a caller
    can name the ones it was given that use none."""
    order = [w for d in split_dirs for w in workload_order(d)]
    known = sorted({n for w in order for n in w.get("networks", [])})
    return [w["name"] for w in order if set(w.get("networks", [])) & set(networks)], known


def left_out_workloads(split_dirs: list[str], networks: Collection[str],
                       setting: str) -> set[str]:
    """The workloads of these splits that any of ``networks`` uses (:func:`network_workloads`),
    to leave out of training: a validation fold.

    Args:
        split_dirs: The training splits.
        networks: The networks left out.
        setting: How the caller names the networks, for the message
            (e.g. ``data.leave_out_networks``).

    Raises:
        ConfigError: A named network uses no workload of these splits (the message lists
            the networks they have).
    """
    names, known = network_workloads(split_dirs, networks)
    unknown = sorted(set(networks) - set(known))
    if unknown:
        raise ConfigError(f"{setting}={list(networks)}: {', '.join(unknown)} uses no workload "
                          f"of {', '.join(split_dirs)}; their networks: "
                          f"{', '.join(known) or 'none'}")
    return set(names)


def count_records(split_dir: str) -> int:
    """The record lines of a split's database (plain or gzipped), without parsing them."""
    import gzip

    path = os.path.join(split_dir, RECORD_FILE)
    opener = (open(path, "rb") if os.path.exists(path)
              else gzip.open(path + ".gz", "rb") if os.path.exists(path + ".gz") else None)
    if opener is None:
        return 0
    with opener as f:
        return sum(1 for line in f if line.strip())


def _encode_split(split_dir: str, mode: str, min_samples: int) -> list[WorkloadSamples]:
    """Replay and encode every valid record of a split, with a progress bar (and its ETA)
    on stderr: the first encoding of a dataset takes minutes."""
    from tqdm import tqdm

    graphs: dict[str, list] = {}
    name = os.path.basename(os.path.normpath(split_dir))
    with tqdm(total=count_records(split_dir), desc=f"encoding {name} ({mode} graphs)",
              unit="rec", mininterval=1.0, dynamic_ncols=True) as bar:
        for item in iter_replayed(split_dir, on_record=bar.update):
            graph = encode(item.sch.mod["main"], mode)
            graph.seconds = torch.tensor([item.seconds])
            graphs.setdefault(item.info["name"], []).append(graph)
    out = []
    for w in workload_order(split_dir):
        gs = graphs.get(w["name"], [])
        if len(gs) < min_samples:
            continue
        ys = relative_throughput([float(g.seconds) for g in gs])
        for g, y in zip(gs, ys, strict=True):
            g.y = torch.tensor([y], dtype=torch.float32)
        out.append(WorkloadSamples(w["name"], w["kind"], gs))
    return out
