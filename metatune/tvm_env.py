"""The TVM runtime's thread pool, as MetaTune runs it: one thread per core.

TVM sizes its CPU thread pool once, when a process first needs it, from
``TVM_NUM_THREADS`` (else half the hardware threads on x86: one thread on a 2-core
machine without SMT). :func:`set_pool_defaults` sets that variable in ``os.environ``
unless the user has: ``tune.py`` (importing :mod:`tuner`), :func:`metatune.load` and the
worker processes they start (which inherit the environment) all size the pool the same
way. TVM's other pool settings (``TVM_BIND_THREADS``, ``TVM_THREAD_POOL_SPIN_COUNT``) are
left as TVM has them (docs/lab/compile/thread-pool.md). This module does not import TVM.
"""

from __future__ import annotations

import os


def host_cpus() -> list[int]:
    """The ids of the CPU cores this process may run on (affinity-aware), sorted."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def host_num_cores() -> int:
    """Number of CPU cores this process may run on (affinity-aware)."""
    return max(1, len(host_cpus()))


def set_pool_defaults(num_threads: int | None = None) -> None:
    """Set ``TVM_NUM_THREADS`` where the environment does not, before any TVM pool
    exists: ``num_threads``, at most every core this process may use.

    Args:
        num_threads: The pool's threads (a target's ``num-cores``); ``None``: every core.
    """
    n = min(int(num_threads), host_num_cores()) if num_threads else host_num_cores()
    os.environ.setdefault("TVM_NUM_THREADS", str(max(1, n)))
