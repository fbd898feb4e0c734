"""The host's cores and the TVM runtime's thread pool: as many threads as the target has cores.

TVM sizes its CPU thread pool when the process first runs a parallel kernel (or asks
for the count), from ``TVM_NUM_THREADS`` if set, else half the hardware threads on x86
(``src/runtime/threading_backend.cc``). On a 2-core machine every TVM kernel therefore
ran on one core while PyTorch ran on two. :func:`configure_tvm_threads` fixes the count
in this process and, through the environment, in every worker process started after it
(builder and runner pools inherit ``os.environ``); the worker initializer calls it again
inside each worker. A pool can be shrunk once it exists but not grown, so importing
:mod:`tuner` sets ``TVM_NUM_THREADS`` to every core before any pool exists.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from metatune.tvm_env import host_cpus

logger = logging.getLogger(__name__)

#: ``ThreadPool`` mode in which ``n`` threads share every listed CPU (no pinning).
_SHARE_ALL_CORES = -3


def tvm_num_threads() -> int:
    """Threads of this process's TVM runtime pool (creates the pool if needed)."""
    import tvm

    return int(tvm.runtime.num_threads())


def configure_tvm_threads(num_threads: int) -> int:
    """Make this process's TVM runtime, and the workers it starts later, use ``num_threads``.

    Args:
        num_threads: Threads of the TVM CPU thread pool (the target's ``num-cores``).

    Returns:
        The pool's thread count after the call, read back from the runtime.
    """
    import tvm

    n = max(1, int(num_threads))
    os.environ["TVM_NUM_THREADS"] = str(n)  # read when a pool is created; children inherit
    if tvm_num_threads() != n:  # the pool existed before: reconfigure it in place
        config = tvm.get_global_func("runtime.config_threadpool")
        config(_SHARE_ALL_CORES, n, [str(c) for c in host_cpus()])
    got = tvm_num_threads()
    if got != n:  # a pool can shrink but not grow once created
        logger.warning("TVM's thread pool runs %d threads, not %d: it was created before "
                       "MetaTune could size it; set TVM_NUM_THREADS=%d before starting",
                       got, n, n)
    return got


def runtime_info(num_cores: int) -> dict[str, Any]:
    """The thread counts a measurement ran with, for reports and bench JSON.

    Args:
        num_cores: The target's cores (the requested thread count).

    Returns:
        ``{"num_cores", "tvm_threads", "torch_threads", "tvm_num_threads_env"}``;
        ``tvm_threads`` is read from this process's runtime.
    """
    import torch

    return {
        "num_cores": int(num_cores),
        "tvm_threads": tvm_num_threads(),
        "torch_threads": int(torch.get_num_threads()),
        "tvm_num_threads_env": os.environ.get("TVM_NUM_THREADS"),
    }
