"""Provenance: where and when numbers were measured, for reports, checkpoints and pages."""

from __future__ import annotations

import datetime
import os
import platform
from typing import Any


def machine_info() -> dict[str, Any]:
    """Where the numbers were measured: host, CPU, Python and library versions."""
    import torch
    import tvm

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cpu_flags": simd_flags(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "tvm": tvm.__version__,
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


#: The /proc/cpuinfo flags that decide which kernels a CPU can run fast.
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
              "avx512_bf16", "amx_tile", "neon", "asimd", "sve")


def simd_flags() -> list[str]:
    """The vector-instruction flags of this CPU (``/proc/cpuinfo``), e.g. ``["avx2", "fma"]``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            line = next((ln for ln in f if ln.startswith(("flags", "Features"))), "")
    except OSError:
        return []
    have = set(line.split(":", 1)[-1].split())
    return [flag for flag in SIMD_FLAGS if flag in have]
