"""Provenance: where and when numbers were measured, for reports, checkpoints and pages."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from typing import Any


def sidecar_path(checkpoint: str) -> str:
    """The provenance ``.json`` that ``train.py`` writes beside ``checkpoint``."""
    return os.path.splitext(checkpoint)[0] + ".json"


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


def code_version(repo: str | None = None) -> str | None:
    """The git commit of the code that ran (``<sha>``, ``<sha>-dirty`` when tracked files of
    the checkout differ from it), or ``None`` outside a git checkout.

    Args:
        repo: The checkout (default: the one this package lives in).
    """
    repo = repo or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        sha = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha
