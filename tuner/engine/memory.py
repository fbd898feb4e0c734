"""The tuning memory: one MetaSchedule database per machine that every run reads and adds to.

Where it lives (:func:`memory_root`): the configured path, else ``$METATUNE_MEMORY``
(``off`` turns it off), else ``$XDG_CACHE_HOME/metatune/memory`` (``~/.cache/...``). Inside,
one directory per :class:`MemoryKey`: the platform (``llvm-znver4``), the TVM version and a
digest of the exact target (cores included) and of the machine that measures (this CPU's
model, or the RPC key), e.g. ``llvm-znver4-tvm0.27.0-1a2b3c4d``. Each holds a MetaSchedule
JSON database (``database_workload.json``, ``database_tuning_record.json``), ``meta.json``
(what it was made for, and when), the lock and the claims (:mod:`tuner.engine.memory_lock`).
Records of another CPU, target or TVM version live in another directory and are never read.

:class:`MachineMemory` reads the files as they grow and appends records whole, one writer
at a time, without duplicates (:mod:`tuner.engine.memory_files`). The run's side (which
tasks are known, the budget, the claims, waiting) is :mod:`tuner.app.memory_run`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import platform
from dataclasses import dataclass

from metatune.config import resolve_path
from metatune.errors import TuningMemoryError
from metatune.files import write_json_atomic
from tuner.engine.memory_files import DatabaseFiles, StoredRecord, append_records
from tuner.engine.memory_lock import Claims, locked
from tuner.engine.platforms import platform_id

logger = logging.getLogger(__name__)

#: The environment variable naming the memory's location (``off``: no memory).
ENV_MEMORY = "METATUNE_MEMORY"
META_FILE = "meta.json"
FORMAT = 1


def default_root() -> str:
    """``$XDG_CACHE_HOME/metatune/memory``, ``~/.cache/metatune/memory`` without it."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "metatune", "memory")


def memory_root(path: str | None) -> str | None:
    """Where the memory lives: ``path``, else ``$METATUNE_MEMORY``, else
    :func:`default_root`; ``None`` when ``$METATUNE_MEMORY`` is ``off`` (and no path given)."""
    if path:
        return resolve_path(path)
    env = os.environ.get(ENV_MEMORY, "").strip()
    if env.lower() == "off":
        return None
    return resolve_path(env) if env else default_root()


def host_cpu() -> str:
    """This machine's CPU model (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class MemoryKey:
    """What a memory's records are comparable under.

    Attributes:
        platform: The target's platform (``llvm-znver4``).
        target: The exact target as canonical JSON (keys sorted).
        tvm: The TVM version.
        measured_on: The machine that measures: its CPU model, or ``rpc:<key>``.
    """

    platform: str
    target: str
    tvm: str
    measured_on: str

    def name(self) -> str:
        """The memory directory's name: ``<platform>-tvm<version>-<digest>``."""
        text = json.dumps([self.target, self.tvm, self.measured_on])
        return f"{self.platform}-tvm{self.tvm}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"

    def meta(self) -> dict:
        """``meta.json``'s identifying part."""
        return {"format": FORMAT, "platform": self.platform, "target": json.loads(self.target),
                "tvm": self.tvm, "measured_on": self.measured_on}


def memory_key(target, measured_on: str | None = None) -> MemoryKey:
    """The key of a target's memory.

    Args:
        target: The ``tvm.target.Target`` tuned for.
        measured_on: Who measures (default: this CPU, :func:`host_cpu`).
    """
    import tvm

    text = json.dumps(json.loads(str(target)), sort_keys=True)
    return MemoryKey(platform_id(target), text, str(tvm.__version__),
                     measured_on or host_cpu())


class MachineMemory:
    """One memory directory (see the module docstring). Made by :meth:`open`.

    Args:
        root: The memory's location (:func:`memory_root`).
        key: Its key.
        keep: Fastest records kept in memory per workload.
        stale_after: Seconds after which another host's untouched claim is stale.
    """

    def __init__(self, root: str, key: MemoryKey, keep: int = 32,
                 stale_after: float = 600.0) -> None:
        self.root = root
        self.key = key
        self.dir = os.path.join(root, key.name())
        self.files = DatabaseFiles(self.dir, keep)
        self.claims = Claims(self.dir, stale_after)

    @classmethod
    def open(cls, root: str, key: MemoryKey, **kwargs) -> MachineMemory:
        """Open (or make) the key's memory directory and read it.

        Raises:
            TuningMemoryError: It cannot be made or read, or its ``meta.json`` names
                another machine, target or TVM version.
        """
        memory = cls(root, key, **kwargs)
        try:
            os.makedirs(memory.dir, exist_ok=True)
            memory._check_meta()
            memory.refresh()
        except OSError as err:
            raise TuningMemoryError(
                f"tuning memory {memory.dir}: {err.strerror or err}; pass memory.path=DIR "
                "with a directory you can write to, or --no-memory") from err
        return memory

    def _check_meta(self) -> None:
        path = os.path.join(self.dir, META_FILE)
        ours = self.key.meta()
        try:
            with open(path, encoding="utf-8") as f:
                meta = json.load(f)
        except FileNotFoundError:
            meta = None
        except ValueError:
            meta = None
            logger.warning("tuning memory %s: unreadable %s is written again", self.dir,
                           META_FILE)
        if meta is None:
            write_json_atomic(path, {**ours, "created": datetime.datetime.now(
                datetime.timezone.utc).isoformat(timespec="seconds")}, indent=1)
            return
        theirs = {k: meta.get(k) for k in ours}
        if theirs != ours:
            wrong = [k for k in ours if theirs[k] != ours[k]]
            raise TuningMemoryError(
                f"tuning memory {self.dir} was made for another {', '.join(wrong)} "
                f"({', '.join(f'{k}={theirs[k]!r}' for k in wrong)}): its records are not "
                "used; move it away, or pass memory.path=DIR")

    def others(self) -> list[str]:
        """The names of the other memories beside this one (other CPUs, targets or TVM
        versions), never read."""
        try:
            names = sorted(os.listdir(self.root))
        except OSError:
            return []
        return [n for n in names if n != os.path.basename(self.dir)
                and os.path.isfile(os.path.join(self.root, n, META_FILE))]

    def describe(self) -> str:
        """``<dir> (12 workloads, 340 records)``."""
        return (f"{self.dir} ({len(self.files.index)} workloads, "
                f"{sum(self.files.counts.values())} records)")

    def log_opened(self) -> None:
        """One line saying which memory a run uses, and that the others are not read."""
        others = self.others()
        logger.info("tuning memory: %s%s", self.describe(),
                    f"; {len(others)} other memor{'y' if len(others) == 1 else 'ies'} there "
                    f"(another CPU, target or TVM version: {', '.join(others[:3])}"
                    f"{', ...' if len(others) > 3 else ''}) not read" if others else "")

    def refresh(self) -> None:
        """Read what other runs added since the last read."""
        with locked(self.dir, shared=True):
            self.files.refresh()

    def add(self, items: list[tuple[list, list]]) -> int:
        """Append records the memory does not hold (see
        :func:`tuner.engine.memory_files.append_records`).

        Raises:
            OSError: A write failed.
        """
        if not items:
            return 0
        with locked(self.dir):
            return append_records(self.files, items)

    def known(self, key: str) -> bool:
        """Whether the memory holds a valid record of a workload (by structural hash)."""
        return self.files.valid[key] > 0

    def best(self, key: str, k: int | None = None) -> list[StoredRecord]:
        """The fastest valid records of a workload, fastest first."""
        return self.files.best(key, k)


def workload_key(mod) -> str:
    """A module's structural hash as MetaSchedule's JSON database spells it."""
    from tvm_ffi import structural_hash

    return str(structural_hash(mod))


def commit_records(database, mod, records: list[StoredRecord]) -> int:
    """Commit stored records of ``mod`` to a MetaSchedule database.

    Returns:
        How many were committed (a record this TVM cannot read back is skipped).
    """
    from tvm.s_tir.meta_schedule.database import TuningRecord

    workload = database.commit_workload(mod)
    done = 0
    for record in records:
        try:
            database.commit_tuning_record(TuningRecord.from_json(record.body, workload))
            done += 1
        except Exception as err:  # noqa: BLE001 - TVM raises its own types on a bad trace
            logger.debug("a memory record does not load: %s", err)
    return done
