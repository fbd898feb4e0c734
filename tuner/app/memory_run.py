"""One run's use of the machine's tuning memory (:mod:`tuner.engine.memory`): which tasks it
tunes, its budget, the records it adds, and the tasks another run is tuning.

At the start (:meth:`RunMemory.open`, the work dir locked and its database open):

1. The work dir's own records go to the memory (those a run without the memory made, or
   a round a killed run had not yet added).
2. Under the memory's lock, each task is sorted: **known** when the memory holds a valid
   record of its workload and this work dir measured none of it (a task this work dir has
   measured resumes as before, so ``--trials`` raised on a work dir tunes on); **claimed**
   when another live run is tuning it; else it is tuned here, and claimed. With
   ``memory.retune`` no task is known.
3. The memory's best records (``memory.copy_top``, default ``trials_per_round``) of every
   task it has are copied into the work dir's database, so the compile uses them and a
   search starts from them; ``memory.json`` in the work dir lists them, and they do not
   count toward the budget. The list is written before the records are copied: a copy it
   cannot name is not made (a failed write turns the memory off for the run, nothing
   copied), so no run ever counts a copy as its own measurement.

**The budget** (``trials``, or ``rounds_per_task``) is what the whole network would get:
with known or claimed tasks it shrinks to their share, ``ceil(trials x tuned tasks /
tasks)``, so each tuned task gets what it would in a run of its own network, and a second
network that shares shapes with a first tunes for less time. A network the memory knows
whole goes straight to compile.

While tuning, every round's records go to the memory as the round is committed
(:class:`MemoryWriter`). At the end (:meth:`RunMemory.settle`) the run releases its claims,
then waits (``memory.wait_seconds`` at most, a line every 30 s) for the tasks other runs
claimed, copies their records, and compiles with what there is.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from typing import Any

from metatune.errors import TuningMemoryError
from metatune.files import write_json_atomic
from tuner.app.config import TuneConfig
from tuner.engine.memory import MachineMemory, commit_records, memory_key, memory_root, workload_key
from tuner.engine.memory_files import DatabaseFiles
from tuner.engine.memory_lock import Claim, locked

logger = logging.getLogger(__name__)

#: The work dir's list of the records copied from the memory.
LEDGER_FILE = "memory.json"
#: Seconds between two lines while waiting for another run's tasks.
WAIT_LINE_SECONDS = 30.0


def tuned_share(trials: int, tuned: int, tasks: int) -> int:
    """The budget of a run that tunes ``tuned`` of a network's ``tasks``: ``trials`` scaled
    to their share, rounded up (``trials`` when it tunes them all)."""
    if tasks <= 0 or tuned >= tasks:
        return trials
    return math.ceil(trials * tuned / tasks)


class MemoryWriter:
    """Adds each committed round's records to the memory (a monitor of
    :class:`tuner.app.monitor.MonitorCallback`, after the record-file guard).

    A failed write to the memory is warned about once and stops the writes: the records
    stay in the work dir, and the next run adds them.
    """

    def __init__(self, run: RunMemory) -> None:
        self.run = run
        self.added = 0
        self.failed = False

    def observe(self, task_id: int, builder_results, runner_results) -> None:
        """Add the records committed since the last round."""
        run = self.run
        new = run.work.refresh()
        if self.failed:
            return
        try:
            self.added += run.add_work_records(new)
            run.memory.claims.touch(run.mine)
        except OSError as err:
            self.failed = True
            logger.warning("tuning memory %s: cannot write (%s); this run's records stay in "
                           "its work dir, the next run adds them", run.memory.dir,
                           err.strerror or err)


class RunMemory:
    """One run's use of the memory (see the module docstring). Made by :meth:`open`.

    Attributes:
        memory: The machine's memory.
        keys: Each task's workload hash.
        known: Indices of the tasks the memory knows (not tuned).
        claimed: Index -> the claim of another run tuning that task (not tuned here).
        mine: The workload hashes this run claimed.
        copied: Records copied from the memory, this run.
    """

    def __init__(self, memory: MachineMemory, cfg: TuneConfig, names: list[str], mods: list,
                 work_dir: str, target) -> None:
        self.memory = memory
        self.cfg = cfg
        self.names = list(names)
        self.mods = list(mods)
        self.keys = [workload_key(m) for m in self.mods]
        self.work_dir = work_dir
        self.target = json.loads(str(target))
        self.me = Claim.mine(work_dir)
        self.work = DatabaseFiles(work_dir, keep=1)
        self.ledger: dict[str, list[str]] = _read_ledger(work_dir)
        self.known: set[int] = set()
        self.claimed: dict[int, Claim] = {}
        self.mine: list[str] = []
        self.copied = 0
        self.synced = 0
        self.waited = 0.0
        self.unsettled: list[str] = []
        self.writer = MemoryWriter(self)
        self.tally = None

    @classmethod
    def open(cls, cfg: TuneConfig, target_info, tasks: list, database,
             work_dir: str) -> RunMemory | None:
        """The run's memory, its tasks sorted and the known ones' records copied; ``None``
        when the memory is off or cannot be used (warned: the run tunes without it)."""
        mcfg = cfg.memory
        if not mcfg.enabled:
            return None
        root = memory_root(mcfg.path)
        if root is None:
            logger.info("tuning memory: off ($METATUNE_MEMORY=off)")
            return None
        measured_on = f"rpc:{cfg.runner.rpc.key}" if cfg.runner.kind == "rpc" else None
        try:
            memory = MachineMemory.open(
                root, memory_key(target_info.target, measured_on),
                keep=max(32, mcfg.copy_top or cfg.trials_per_round),
                stale_after=mcfg.stale_claim_seconds)
        except TuningMemoryError as err:
            logger.warning("%s; this run tunes without it", err)
            return None
        memory.log_opened()
        run = cls(memory, cfg, [t.name for t in tasks],
                  [t.extracted.dispatched[0] for t in tasks], work_dir, target_info.target)
        try:
            run.start(database)
        except OSError as err:  # its lock, claims or ledger cannot be written: without it
            run.release()
            logger.warning("tuning memory %s: %s%s; this run tunes without it", memory.dir,
                           err.strerror or err, f" ({err.filename})" if err.filename else "")
            return None
        return run

    # -- the start --------------------------------------------------------------------

    def add_work_records(self, records: list) -> int:
        """Add records read from the work dir to the memory (those of this target).

        Raises:
            OSError: The memory cannot be written.
        """
        lines: dict[str, list] = {}
        items = []
        for r in records:
            if r.body[2] != self.target:
                continue  # another target's (cores): another memory's
            if r.key not in lines:
                lines[r.key] = self.work.workload_line(r.key)
            items.append((lines[r.key], r.body))
        return self.memory.add(items)

    def start(self, database) -> None:
        """Add the work dir's records to the memory, sort the tasks, claim those tuned
        here and copy the memory's records (steps 1-3 of the module docstring)."""
        try:
            self.synced = self.add_work_records(self.work.refresh())
        except OSError as err:
            self.writer.failed = True
            logger.warning("tuning memory %s: cannot write (%s); it is read, not added to",
                           self.memory.dir, err.strerror or err)
        retune = self.cfg.memory.retune
        with locked(self.memory.dir):
            self.memory.files.refresh()
            tune = []
            for i, key in enumerate(self.keys):
                # a task another live run is tuning is not known yet, even when some of
                # its rounds are in the memory: it is claimed, and waited for below
                held = self.memory.claims.holder(key, self.me) is not None
                if not retune and not held and self.memory.known(key) and self.own(i) == 0:
                    self.known.add(i)
                else:
                    tune.append(i)
            if not self.writer.failed:
                theirs = self.memory.claims.take([self.keys[i] for i in tune], self.me)
                self.claimed = {i: theirs[self.keys[i]] for i in tune if self.keys[i] in theirs}
                self.mine = [self.keys[i] for i in tune if i not in self.claimed]
        self.copied = self._copy(database, range(len(self.mods)))
        self.work.refresh()  # the copies are not this run's measurements
        self._log_plan()

    def own(self, i: int) -> int:
        """Records of task ``i`` this work dir measured (not copied from the memory)."""
        key = self.keys[i]
        copied = set(self.ledger.get(key, ()))
        return self.work.counts[key] - sum((key, d) in self.work.digests for d in copied)

    def _copy(self, database, indices) -> int:
        """Copy the memory's best records of tasks ``indices`` that the work dir lacks.

        ``memory.json`` names them first, then they are committed: a record the work dir
        holds and the ledger does not name is this work dir's own measurement (:meth:`own`),
        so a copy is never made that the ledger cannot name. A name without its record (the
        process killed between the two, or a record this TVM cannot load) counts for
        nothing: :meth:`own` subtracts only the named records the work dir holds.

        Raises:
            OSError: ``memory.json`` cannot be written; nothing was copied.
        """
        top = self.cfg.memory.copy_top or self.cfg.trials_per_round
        picked = []
        for i in indices:
            key = self.keys[i]
            records = [r for r in self.memory.best(key, top)
                       if (key, r.digest) not in self.work.digests]
            if records:
                picked.append((i, records))
        if not picked:
            return 0
        ledger = {k: list(v) for k, v in self.ledger.items()}
        for i, records in picked:
            named = ledger.setdefault(self.keys[i], [])
            named.extend(d for d in dict.fromkeys(r.digest for r in records) if d not in named)
        write_json_atomic(os.path.join(self.work_dir, LEDGER_FILE),
                          {"memory": self.memory.dir, "copied": ledger})
        self.ledger = ledger
        return sum(commit_records(database, self.mods[i], records) for i, records in picked)

    def _log_plan(self) -> None:
        n = len(self.mods)
        if self.known:
            logger.info("tuning memory: %d of %d tasks known (%d records copied into the "
                        "work dir): not tuned again%s", len(self.known), n, self.copied,
                        "" if len(self.known) < n else "; nothing to tune")
        for i, claim in sorted(self.claimed.items()):
            logger.info("tuning memory: task %d (%s) is being tuned by %s: not tuned here, "
                        "its records are read before compiling", i, self.names[i],
                        claim.describe())

    # -- what tune() asks ---------------------------------------------------------------

    @property
    def skip(self) -> set[int]:
        """Indices of the tasks this run does not tune (known or claimed)."""
        return self.known | set(self.claimed)

    def own_counts(self, before: list[int]) -> list[int]:
        """``before`` (records per task in the work dir) less those copied from the memory."""
        return [max(0, b - (self.work.counts[k] - self.own(i)))
                for i, (b, k) in enumerate(zip(before, self.keys, strict=True))]

    def budget(self, trials: int) -> int:
        """The run's budget (see the module docstring)."""
        n = len(self.mods)
        return tuned_share(trials, n - len(self.skip), n)

    def with_transfer(self, search, target, layout: str | None):
        """``search`` with schedule transfer (``memory.transfer``): each task's first round
        starts from the best schedules of the most similar workloads of the memory and the
        shipped datasets (:func:`tuner.search.transfer.with_transfer`)."""
        if not self.cfg.memory.transfer:
            return search
        from tuner.search.transfer import DatasetSource, TransferTally, dataset_sources
        from tuner.search.transfer import with_transfer as wrap

        own = [DatasetSource(self.memory.dir)] if self.memory.files.index else []
        sources = [*own, *dataset_sources(target, layout)]
        self.tally = TransferTally()
        return wrap(search, sources=sources, tally=self.tally)

    def settle(self, database) -> None:
        """Release this run's claims, then wait for the tasks other runs claimed and copy
        their records (see the module docstring)."""
        self.release()
        waiting = dict(self.claimed)
        start = time.monotonic()
        limit = self.cfg.memory.wait_seconds
        next_line = 0.0
        while waiting:
            with locked(self.memory.dir):
                waiting = {i: c for i, c in waiting.items()
                           if self.memory.claims.holder(self.keys[i], self.me) is not None}
            elapsed = time.monotonic() - start
            if not waiting or elapsed >= limit:
                break
            if elapsed >= next_line:
                owners = sorted({c.describe() for c in waiting.values()})
                logger.info("tuning memory: waiting for %d task(s) that %s %s tuning: %.0f s "
                            "of at most %.0f s (memory.wait_seconds)", len(waiting),
                            "; ".join(owners), "is" if len(owners) == 1 else "are", elapsed,
                            limit)
                next_line = elapsed + WAIT_LINE_SECONDS
            time.sleep(min(1.0, limit - elapsed))
        self.waited = time.monotonic() - start
        if not self.claimed:
            return
        self.memory.refresh()
        self.work.refresh()
        copied = True
        try:
            self.copied += self._copy(database, self.claimed)
        except OSError as err:  # nothing copied: the tasks get the cost model's pick
            copied = False
            logger.warning("tuning memory: cannot write the work dir's %s (%s): the records "
                           "of the tasks other runs tuned are not copied", LEDGER_FILE,
                           err.strerror or err)
        self.work.refresh()
        self.unsettled = [self.names[i] for i in sorted(self.claimed)
                          if not copied or not self.memory.known(self.keys[i])]
        if waiting:
            logger.warning("tuning memory: stopped waiting after %.0f s (memory.wait_seconds) "
                           "for %d task(s) another run is still tuning: compiling with the "
                           "records it has added so far", self.waited, len(waiting))
        if self.unsettled:
            logger.warning("tuning memory: no records of %d task(s) another run claimed (%s): "
                           "they get the cost model's pick", len(self.unsettled),
                           ", ".join(self.unsettled))

    def release(self) -> None:
        """Release this run's claims (again: nothing)."""
        if not self.mine:
            return
        try:
            with locked(self.memory.dir):
                self.memory.claims.release(self.mine, self.me)
        except OSError as err:
            logger.warning("tuning memory %s: cannot release claims (%s); they are stale "
                           "once this process ends", self.memory.dir, err.strerror or err)
        self.mine = []

    def summary(self) -> dict[str, Any]:
        """What the memory did in this run, for the report."""
        n = len(self.mods)
        budget = self.budget(self.cfg.trials)
        out = {
            "dir": self.memory.dir,
            "tasks": n,
            "known": len(self.known),
            "claimed": len(self.claimed),
            "retune": self.cfg.memory.retune,
            "known_tasks": [self.names[i] for i in sorted(self.known)],
            "claimed_tasks": [self.names[i] for i in sorted(self.claimed)],
            "records_copied": self.copied,
            "records_added": self.synced + self.writer.added,
            "budget": budget,
            "trials_saved": self.cfg.trials - budget,
            "waited_seconds": round(self.waited, 1),
            "unsettled": self.unsettled,
        }
        if self.tally is not None:
            out["transfer"] = self.tally.summary()
        return out


def _read_ledger(work_dir: str) -> dict[str, list[str]]:
    """The work dir's ``memory.json``: workload hash -> digests of the records copied."""
    try:
        with open(os.path.join(work_dir, LEDGER_FILE), encoding="utf-8") as f:
            copied = json.load(f)["copied"]
        return {str(k): [str(d) for d in v] for k, v in copied.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
