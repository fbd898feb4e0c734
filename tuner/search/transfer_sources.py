"""Where transferred schedules come from: the shipped datasets and any MetaSchedule database.

A source lists its workloads (:class:`SourceWorkload`: a :class:`Signature`, the best few
measured records) indexed by kind (:meth:`DatasetSource.by_kind`). Two kinds of source:

- :class:`DatasetSource`: one split of a shipped dataset (``data/<platform>/<split>/``,
  gzipped MetaSchedule JSON databases, :mod:`metatune.records`). It is read once per process
  (on first use) and only the best ``per_workload`` records of each workload are kept: the
  record file is scanned for each line's workload and run time, and only the kept lines
  are parsed whole (when their traces are wanted). With a ``cache_dir`` (``work/cache``
  from :func:`dataset_sources`) what was kept is written to an index there
  (:mod:`tuner.search.transfer_cache`) that later processes read instead. A split that is
  missing or unreadable is skipped with one warning.
- :class:`DatabaseSource`: any MetaSchedule ``Database`` (the tuning memory, a work dir's),
  read when first used.

:func:`dataset_sources` picks the splits a target reads: its own platform's
(``data/<platform_id>``) when it has one, else every platform of the target's kind; of
those, the splits measured in the run's data layout when there are any.
"""

from __future__ import annotations

import gzip
import heapq
import json
import logging
import os
import re
import zlib
from dataclasses import dataclass, field

from metatune.config import DEFAULT_CACHE_DIR, repo_path
from metatune.dataset import dataset_layout
from metatune.records import RECORD_FILE, measured_seconds, read_workload_json
from tuner.engine.platforms import dataset_kind, platform_id
from tuner.search.transfer_cache import index_path, load_index, save_index
from tuner.search.transfer_similarity import Signature, signature

logger = logging.getLogger(__name__)

#: Records kept per workload by default (the best measured).
PER_WORKLOAD = 8


@dataclass
class SourceWorkload:
    """One measured workload of a source.

    Attributes:
        label: Where it comes from (``<source>:<workload name>``), for messages.
        signature: Its :class:`Signature`.
        seconds: Its kept records' mean run times, best first.
        traces: Returns the trace of kept record ``i`` (``None`` when it does not replay on
            its own workload).
        shash: Its structural hash (``""`` when unknown).
    """

    label: str
    signature: Signature
    seconds: list[float]
    traces: object = field(repr=False)
    shash: str = ""


class _Source:
    """Workloads indexed by kind, filled on first use by ``_load``."""

    label = "source"
    _index: dict[tuple, list[SourceWorkload]] | None = None

    def _load(self) -> list[SourceWorkload]:
        raise NotImplementedError

    def by_kind(self) -> dict[tuple, list[SourceWorkload]]:
        """The source's workloads grouped by :attr:`Signature.kind` (read on first call)."""
        if self._index is None:
            index: dict[tuple, list[SourceWorkload]] = {}
            for w in self._load():
                index.setdefault(w.signature.kind, []).append(w)
            self._index = index
        return self._index

    def workloads(self, kind: tuple) -> list[SourceWorkload]:
        """The workloads of one kind."""
        return self.by_kind().get(kind, [])


# A record line: [workload index, [trace, run_secs, target, args_info]]. The run times are
# the list right after the trace (whose decisions end in "]]") and before the target.
_SECS = re.compile(rb"\]\],(\[[-0-9.eE, ]*\]|null),[{\"]")
_LEAD = re.compile(rb"\s*\[\s*(\d+)\s*,")


def _scan_line(line: bytes) -> tuple[int, list[float] | None] | None:
    """``(workload index, run times)`` of a record line without parsing its trace; ``None``
    when the line is not a record."""
    lead = _LEAD.match(line)
    matches = list(_SECS.finditer(line))
    if lead is not None and matches:
        secs = matches[-1].group(1)
        try:
            return int(lead.group(1)), (None if secs == b"null" else
                                        [float(x) for x in secs[1:-1].split(b",") if x.strip()])
        except ValueError:
            pass
    try:  # an unusual layout: parse it whole
        index, raw = json.loads(line)
        return int(index), raw[1]
    except (ValueError, TypeError, IndexError, KeyError):
        return None


def best_record_lines(split_dir: str, per_workload: int) -> tuple[dict[int, list], int]:
    """The best ``per_workload`` valid records of each workload of a database directory.

    Returns:
        ``{workload index: [(mean seconds, record line compressed with zlib), ...] best
        first}`` (a line is parsed only when its trace is wanted: :class:`_Traces`) and the
        number of lines that are not records.

    Raises:
        OSError, EOFError, zlib.error: The record file cannot be read.
    """
    path = os.path.join(split_dir, RECORD_FILE)
    opener = open if os.path.exists(path) else gzip.open
    path = path if os.path.exists(path) else path + ".gz"
    heaps: dict[int, list] = {}
    corrupt = 0
    with opener(path, "rb") as f:
        for number, line in enumerate(f):
            if not line.strip():
                continue
            scanned = _scan_line(line)
            if scanned is None:
                corrupt += 1
                continue
            secs = measured_seconds(scanned[1])
            if secs is None:
                continue
            heap = heaps.setdefault(scanned[0], [])
            item = (-secs, number, line)  # a max-heap of the kept: the worst on top
            if len(heap) < per_workload:
                heapq.heappush(heap, item)
            elif -secs > heap[0][0]:
                heapq.heapreplace(heap, item)
    return {index: [(-neg, zlib.compress(line, 1))
                    for neg, _, line in sorted(heap, key=lambda t: (-t[0], t[1]))]
            for index, heap in heaps.items()}, corrupt


class _Traces:
    """The traces of a dataset workload's kept records: the workload is decoded, and a
    record parsed and replayed on it, when first asked (``None`` for one that does not)."""

    def __init__(self, entry: list, lines: list[bytes], workload=None) -> None:
        self.entry = entry
        self.lines = lines
        self.workload = workload
        self.cache: dict[int, object] = {}

    def __call__(self, i: int):
        if i not in self.cache:
            from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

            try:
                if self.workload is None:
                    self.workload = Workload.from_json(self.entry)
                raw = json.loads(zlib.decompress(self.lines[i]))[1]
                self.cache[i] = TuningRecord.from_json(raw, self.workload).trace
            except Exception as err:  # noqa: BLE001 - corrupt, or a record of another TVM
                logger.debug("stored record does not replay on its workload: %s", err)
                self.cache[i] = None
        return self.cache[i]


#: Splits read in this process: ``{(real path, per_workload, files' sizes and times): workloads}``.
_SPLITS: dict[tuple, list[SourceWorkload]] = {}
#: Splits already warned about in this process (one warning each).
_WARNED: set[str] = set()


def _warn_once(split_dir: str, why: str) -> None:
    if split_dir not in _WARNED:
        _WARNED.add(split_dir)
        logger.warning("schedule transfer: %s skipped (%s)", split_dir, why)


def _stamp(split_dir: str) -> tuple:
    return tuple(sorted((n, os.stat(os.path.join(split_dir, n)).st_size,
                         int(os.stat(os.path.join(split_dir, n)).st_mtime))
                        for n in os.listdir(split_dir)))


def read_split(split_dir: str, per_workload: int = PER_WORKLOAD,
               cache_dir: str | None = None) -> list[SourceWorkload]:
    """The workloads of one dataset split with their best records (cached per process, and
    in ``cache_dir`` when given: :mod:`tuner.search.transfer_cache`).

    A split that is missing or cannot be read is skipped with one warning (``[]``).
    """
    try:
        key = (os.path.realpath(split_dir), per_workload, _stamp(split_dir))
    except OSError as err:
        _warn_once(split_dir, f"cannot be read: {err.strerror or err}")
        return []
    if key not in _SPLITS:
        path = index_path(cache_dir, split_dir, per_workload) if cache_dir else None
        index = load_index(path) if path else None
        if index is None:
            index = _index_split(split_dir, per_workload)
            if path and index:
                save_index(path, index)
        _SPLITS[key] = [SourceWorkload(
            label=f"{split_dir}:{w['label']}",
            signature=Signature(tuple(tuple(b) for b in w["kind"]), tuple(w["extents"])),
            seconds=list(w["seconds"]), traces=_Traces(w["workload"], w["lines"],
                                                       w.get("decoded")),
            shash=w["shash"]) for w in index]
    return _SPLITS[key]


def _index_split(split_dir: str, per_workload: int) -> list[dict]:
    """Read a split for transfer: per workload with a valid record, its name, hash,
    signature, the best ``per_workload`` run times and record lines, its database entry
    (as :func:`tuner.search.transfer_cache.save_index` takes them)."""
    from tvm.s_tir.meta_schedule.database import Workload

    names = {}
    try:
        with open(os.path.join(split_dir, "meta.json"), encoding="utf-8") as f:
            names = {str(w["shash"]): w["name"] for w in json.load(f).get("workloads", [])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # names are only labels
    try:
        entries = read_workload_json(split_dir)
        best, corrupt = best_record_lines(split_dir, per_workload)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        _warn_once(split_dir, f"not a readable MetaSchedule database: {err}")
        return []
    out, bad = [], 0
    for index, entry in enumerate(entries):
        if index not in best:
            continue
        try:
            workload = Workload.from_json(entry)
            sig = signature(workload.mod)
        except Exception:  # noqa: BLE001 - a corrupt line, or a module this TVM cannot read
            bad += 1
            continue
        shash = str(entry[0])
        out.append({"label": names.get(shash, shash), "shash": shash,
                    "kind": [list(b) for b in sig.kind], "extents": list(sig.extents),
                    "seconds": [t for t, _ in best[index]], "workload": entry,
                    "lines": [line for _, line in best[index]], "decoded": workload})
    if corrupt or bad:
        logger.warning("schedule transfer: %s: %d corrupt record lines and %d unreadable "
                       "workloads skipped", split_dir, corrupt, bad)
        _WARNED.add(split_dir)
    if not out and (best or entries):
        _warn_once(split_dir, "no workload with a valid measurement could be read")
    return out


class DatasetSource(_Source):
    """One split of a shipped dataset (read on first use, cached per process).

    Args:
        split_dir: ``data/<platform>/<split>``.
        per_workload: Best records kept per workload.
        cache_dir: Where its index is kept between processes (``None``: nowhere).
    """

    def __init__(self, split_dir: str, per_workload: int = PER_WORKLOAD,
                 cache_dir: str | None = None) -> None:
        self.split_dir = split_dir
        self.label = split_dir
        self.per_workload = int(per_workload)
        self.cache_dir = cache_dir

    def _load(self) -> list[SourceWorkload]:
        return read_split(self.split_dir, self.per_workload, self.cache_dir)


class DatabaseSource(_Source):
    """A MetaSchedule ``Database`` (the tuning memory, a work dir's), read on first use.

    Args:
        database: The database.
        label: Its name in messages.
        per_workload: Best records kept per workload.
    """

    def __init__(self, database, label: str = "database",
                 per_workload: int = PER_WORKLOAD) -> None:
        self.database = database
        self.label = label
        self.per_workload = int(per_workload)

    def _load(self) -> list[SourceWorkload]:
        from tvm_ffi import structural_hash

        groups: dict[int, tuple] = {}
        for record in self.database.get_all_tuning_records():
            secs = measured_seconds(record.run_secs)
            if secs is None:
                continue
            key = structural_hash(record.workload.mod)
            groups.setdefault(key, (record.workload, []))[1].append((secs, record.trace))
        out = []
        for key, (workload, measured) in groups.items():
            measured.sort(key=lambda st: st[0])
            kept = measured[: self.per_workload]
            traces = [t for _, t in kept]
            out.append(SourceWorkload(
                label=f"{self.label}:{key}", signature=signature(workload.mod),
                seconds=[s for s, _ in kept], traces=traces.__getitem__, shash=str(key)))
        return out


def _splits(platform_dir: str) -> list[str]:
    """The split directories of a dataset (those with a record file), sorted."""
    try:
        names = sorted(os.listdir(platform_dir))
    except OSError:
        return []
    return [os.path.join(platform_dir, n) for n in names
            if any(os.path.exists(os.path.join(platform_dir, n, RECORD_FILE + ext))
                   for ext in ("", ".gz"))]


def dataset_sources(target, layout: str | None = None, data_root: str | None = None,
                    per_workload: int = PER_WORKLOAD,
                    cache_dir: str | None = DEFAULT_CACHE_DIR) -> list[DatasetSource]:
    """The dataset splits a target transfers schedules from (see the module docstring).

    Args:
        target: The ``tvm.target.Target`` tuned for.
        layout: The run's data layout (``NHWC``, ``NCHW``; ``None``: any).
        data_root: The folder of the datasets (default: the repository's ``data/``).
        per_workload: Best records kept per workload.
        cache_dir: Where the splits' indexes are kept between processes (default
            ``work/cache``; ``None``: nowhere, each process reads the splits again).

    Returns:
        One :class:`DatasetSource` per split, nothing read yet.
    """
    root = data_root or repo_path("data")
    own = _splits(os.path.join(root, platform_id(target)))
    if own:
        splits = own
    else:
        kind = str(target.kind.name)
        try:
            platforms = sorted(os.listdir(root))
        except OSError:
            _warn_once(root, "no datasets there")
            return []
        splits = [s for p in platforms for s in _splits(os.path.join(root, p))
                  if dataset_kind(s) in (kind, None)]
    if layout:
        matching = [s for s in splits if dataset_layout(s) == layout]
        splits = matching or splits
    return [DatasetSource(s, per_workload, cache_dir) for s in splits]
