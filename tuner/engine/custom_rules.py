"""The custom schedule rules TVM's own pooling asks for and TVM never registers.

TOPI's pooling (C++, ``topi/nn/pooling.h``) annotates its block with ``schedule_rule =
"meta_schedule.pool_max"`` (or ``pool_avg``, ``adaptive_pool_max``, ``adaptive_pool_avg``),
and MetaSchedule's ``ApplyCustomRule`` looks for a function named
``s_tir.meta_schedule.<target key>.<that name>``. TVM 0.27 registers none of them, so every
design space of a pooling task logged ``Warning: Unknown schedule rule
"meta_schedule.pool_max" for target keys ("cpu",)`` (a line per pooling task in ``make
tune``), then removed the annotation so that the default rules schedule the block.

The cause is TVM's (the annotation and the registry disagree), not our lowering or task
extraction. The functions registered here do what ``ApplyCustomRule`` does after its
warning, remove the annotation and hand the schedule back, so the design spaces (and the
workloads' hashes: the annotation is in the task's module either way) stay exactly as they
were; only the line goes.
"""

from __future__ import annotations

#: The rule names TOPI's pooling writes into its blocks.
POOL_RULES = ("meta_schedule.pool_max", "meta_schedule.pool_avg",
              "meta_schedule.adaptive_pool_max", "meta_schedule.adaptive_pool_avg")
#: The target keys ``ApplyCustomRule`` looks under (a CPU's ``cpu``; a GPU's kind, ``gpu``).
TARGET_KEYS = ("cpu", "gpu", "cuda", "rocm")


def _default_rules(sch, block):
    """``ApplyCustomRule``'s own answer to a rule it cannot find: the annotation removed,
    so the default rules that follow schedule the block."""
    sch.unannotate(block, "schedule_rule")
    return [sch]


def register_pool_rules() -> None:
    """Register :data:`POOL_RULES` under every :data:`TARGET_KEYS` key, once per process
    (a name registered already, by TVM or by an earlier call, is kept)."""
    import tvm_ffi

    for key in TARGET_KEYS:
        for rule in POOL_RULES:
            name = f"s_tir.meta_schedule.{key}.{rule}"
            if tvm_ffi.get_global_func(name, allow_missing=True) is None:
                tvm_ffi.register_global_func(name, _default_rules)
