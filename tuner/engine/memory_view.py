"""The tuning memory as a read-only MetaSchedule database, for compiling with it
(``torch.compile(backend="metatune")``): a workload's records are decoded only when a
compile asks for it, so a large memory costs nothing for the workloads a graph lacks."""

from __future__ import annotations

import logging

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.database import PyDatabase

from metatune.errors import TuningMemoryError
from tuner.engine.memory import MachineMemory, workload_key

logger = logging.getLogger(__name__)


@derived_object
class MemoryView(PyDatabase):
    """The fastest records of a :class:`~tuner.engine.memory.MachineMemory`, read-only.

    Args:
        memory: The memory (read as it was when it was opened or last refreshed).
    """

    def __init__(self, memory: MachineMemory) -> None:
        super().__init__()
        self.memory = memory

    def has_workload(self, mod) -> bool:
        return self.memory.known(workload_key(mod))

    def commit_workload(self, mod):
        from tvm.s_tir.meta_schedule.database import Workload

        return Workload(mod)

    def commit_tuning_record(self, record) -> None:
        raise TuningMemoryError("the tuning memory's view is read-only: tune.py adds records")

    def get_top_k(self, workload, top_k: int) -> list:
        from tvm.s_tir.meta_schedule.database import TuningRecord

        out = []
        for r in self.memory.best(workload_key(workload.mod), top_k):
            try:  # a record this TVM cannot read back is skipped, as commit_records does
                out.append(TuningRecord.from_json(r.body, workload))
            except Exception as err:  # noqa: BLE001 - TVM raises its own types on a bad trace
                logger.debug("a memory record does not load: %s", err)
        return out

    def get_all_tuning_records(self) -> list:
        from tvm.s_tir.meta_schedule.database import Workload

        out = []
        for key in self.memory.files.index:
            if self.memory.known(key):
                workload = Workload.from_json(self.memory.files.workload_line(key))
                out += self.get_top_k(workload, self.memory.files.keep)
        return out

    def __len__(self) -> int:
        return sum(min(n, self.memory.files.keep) for n in self.memory.files.valid.values())
