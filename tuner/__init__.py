"""MetaSchedule-facing code: networks, tasks, tuning, evaluation.

TVM sizes its CPU thread pool once, when a process first needs it, from
``TVM_NUM_THREADS`` (else half the hardware threads on x86), and can only shrink it
later. Every core is the default here, set before any TVM runtime starts its pool;
:func:`tuner.engine.runtime.configure_tvm_threads` then sets the target's exact count.
"""

from metatune.tvm_env import set_pool_defaults as _set_pool_defaults

_set_pool_defaults()

# torch.compile(backend="metatune"), registered by name; nothing is imported until it is used.
from tuner.registration import install as _install_backend  # noqa: E402

_install_backend()
