"""MetaSchedule's MLP cost model, usable from the first round.

``SegmentSumMLPTrainer.train_full`` holds out ``floor(n_workloads * test_split)``
workloads as a test set and fails on an empty one, i.e. whenever fewer than five
workloads have measurements (always in the first rounds of a tuning run). Until there
are enough workloads, this trainer trains incrementally on every workload instead.
"""

from __future__ import annotations

import math


def make_mlp_model():
    """An ``ms.cost_model.MLPModel`` whose full training never sees an empty test set."""
    from tvm.s_tir.meta_schedule.cost_model.mlp_model import MLPModel, SegmentSumMLPTrainer

    class _Trainer(SegmentSumMLPTrainer):
        def train_full(self) -> None:
            n = len(self.state.data)
            if math.floor(n * self.test_split) >= 1 and n > 1:
                super().train_full()
                return
            for group in list(self.state.data.values()):
                self.train_incremental(group.features, group.costs)

    return MLPModel(trainer=_Trainer())
