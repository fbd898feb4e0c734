"""MetaSchedule-facing code: networks, tasks, tuning, evaluation.

TVM sizes its CPU thread pool once, when a process first needs it, from
``TVM_NUM_THREADS`` (else half the hardware threads on x86), and can only shrink it
later. Every core is the default here, set before any TVM runtime starts its pool;
:func:`tuner.engine.runtime.configure_tvm_threads` then sets the target's exact count.
"""

import os as _os

if "TVM_NUM_THREADS" not in _os.environ:
    try:
        _os.environ["TVM_NUM_THREADS"] = str(max(1, len(_os.sched_getaffinity(0))))
    except AttributeError:  # pragma: no cover - not Linux
        _os.environ["TVM_NUM_THREADS"] = str(max(1, _os.cpu_count() or 1))
