"""Register only the tensor intrinsics a target needs, in milliseconds instead of 30 s.

``import tvm.s_tir.tensor_intrin`` registers the intrinsics of every backend; on this
2-core CPU it takes about 29 s, 19 s of which go to the CUDA ones. MetaSchedule imports
it in ``TuneContext`` (main process) and in ``default_build`` (each builder worker), so
a fresh builder worker spends its first, time-limited job on it and times out. Here we
create the package module without running its ``__init__`` and import only the
submodules of the target's backend; later ``import tvm.s_tir.tensor_intrin`` statements
are then no-ops.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import platform
import sys

logger = logging.getLogger(__name__)

_PACKAGE = "tvm.s_tir.tensor_intrin"

#: Submodules of ``tvm.s_tir.tensor_intrin`` each target kind needs.
_SUBMODULES: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda",),
    "rocm": ("rocm",),
    "metal": ("metal",),
    "hexagon": ("hexagon",),
}


def _cpu_submodules() -> tuple[str, ...]:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i686", "i386"):
        return ("x86",)
    if machine in ("aarch64", "arm64") or machine.startswith("arm"):
        return ("arm_cpu",)
    if machine.startswith("riscv"):
        return ("riscv_cpu",)
    return ()


def submodules_for(kind: str) -> tuple[str, ...] | None:
    """Return the intrinsic submodules for a target kind, or ``None`` for "all of them".

    Args:
        kind: A TVM target kind name (``"llvm"``, ``"cuda"``, ...).

    Returns:
        The submodule names to import, or ``None`` when the kind is not known here and
        the full package must be imported.
    """
    if kind == "llvm":
        return _cpu_submodules()
    return _SUBMODULES.get(kind)


def load_tensor_intrinsics(kinds: tuple[str, ...] = ("llvm",)) -> None:
    """Register the tensor intrinsics for the given target kinds (idempotent).

    Args:
        kinds: Target kind names; the host CPU's intrinsics are always included since
            every target compiles host code with LLVM.
    """
    import tvm.s_tir  # noqa: F401  (parent package must exist first)

    wanted: set[str] = set(_cpu_submodules())
    for kind in kinds:
        subs = submodules_for(kind)
        if subs is None:
            importlib.import_module(_PACKAGE)  # unknown kind: register everything
            return
        wanted.update(subs)

    package = sys.modules.get(_PACKAGE)
    if package is None:
        spec = importlib.util.find_spec(_PACKAGE)
        if spec is None:  # pragma: no cover - broken TVM install
            raise ImportError(f"{_PACKAGE} not found: reinstall apache-tvm")
        package = importlib.util.module_from_spec(spec)
        sys.modules[_PACKAGE] = package
        sys.modules["tvm.s_tir"].tensor_intrin = package
    for sub in sorted(wanted):
        importlib.import_module(f"{_PACKAGE}.{sub}")
    logger.debug("tensor intrinsics loaded for %s: %s", kinds, sorted(wanted))


def worker_initializer(kinds: tuple[str, ...] = ("llvm",), num_threads: int | None = None) -> None:
    """Initializer of builder/runner worker processes: import TVM and the intrinsics once.

    Args:
        kinds: Target kind names, as for :func:`load_tensor_intrinsics`.
        num_threads: Threads of the worker's TVM runtime (the target's cores); ``None``
            keeps what the environment says.
    """
    if num_threads is not None:
        from tuner.engine.runtime import configure_tvm_threads

        configure_tvm_threads(num_threads)
    load_tensor_intrinsics(kinds)
    # Import what default_build imports, so the first timed job pays nothing extra.
    import tvm.driver  # noqa: F401
    import tvm.s_tir.transform  # noqa: F401
