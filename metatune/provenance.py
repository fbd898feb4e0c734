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
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "tvm": tvm.__version__,
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
