"""Build TVM targets from user strings, detecting the host CPU and checking availability."""

from __future__ import annotations

import json
from dataclasses import dataclass

from metatune.errors import TargetUnavailableError
from metatune.tvm_env import host_cpus, host_num_cores
from tuner.engine.runtime import configure_tvm_threads

__all__ = ["TARGET_CHOICES", "TargetInfo", "host_cpus", "host_num_cores", "is_cross",
           "resolve_target", "runs_here"]

#: Target names accepted on the command line besides a JSON target dict.
TARGET_CHOICES = ("llvm", "cuda", "rocm")


@dataclass(frozen=True)
class TargetInfo:
    """A resolved target.

    Attributes:
        target: The ``tvm.target.Target``.
        kind: Its kind name (``"llvm"``, ``"cuda"``, ``"rocm"``).
        device_type: The TVM device name to run on (``"cpu"``, ``"cuda"``, ``"rocm"``).
        num_cores: CPU cores used for tuning workers and the CPU runtime.
        description: One line for reports, e.g. ``"llvm -mcpu=emeraldrapids (2 cores)"``.
    """

    target: object
    kind: str
    device_type: str
    num_cores: int
    description: str


def host_llvm_target_dict(num_cores: int | None = None) -> dict:
    """The LLVM target dict for this machine's CPU.

    Args:
        num_cores: Cores to tune for; defaults to the cores this process may use.

    Returns:
        A dict such as ``{"kind": "llvm", "mcpu": "emeraldrapids", "num-cores": 2}``.
    """
    from tvm.target import codegen

    cpu = codegen.llvm_get_system_cpu()
    spec: dict = {"kind": "llvm", "num-cores": int(num_cores or host_num_cores())}
    if cpu and cpu != "generic":
        spec["mcpu"] = str(cpu)
    return spec


def _check_llvm_cpu(spec: dict) -> None:
    """Refuse an ``mcpu`` that LLVM does not know for the target's triple.

    Raises:
        TargetUnavailableError: Unknown CPU name, with a few valid ones.
    """
    from tvm.target import codegen

    cpu = spec.get("mcpu")
    if not cpu:
        return
    triple = str(spec.get("mtriple") or codegen.llvm_get_system_triple())
    if codegen.llvm_is_valid_cpu(str(cpu), triple):
        return
    host = codegen.llvm_get_system_cpu()
    raise TargetUnavailableError(
        f"--target mcpu={cpu!r} is not a CPU LLVM knows for {triple}; use e.g. "
        f"mcpu={host!r} (this machine), 'skylake-avx512' or 'znver3', or leave mcpu out "
        "to detect the host CPU")


def resolve_target(name: str, num_cores: int | None = None) -> TargetInfo:
    """Turn ``--target`` into a checked target.

    Args:
        name: ``"llvm"`` (host CPU detected), ``"cuda"``, ``"rocm"``, or a JSON target dict
            such as ``'{"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4}'``.
        num_cores: CPU cores to use; defaults to all cores this process may use.

    Returns:
        The resolved :class:`TargetInfo`.

    Side effect: this process's TVM runtime, and every worker it starts afterwards, runs
    ``num_cores`` threads (:func:`tuner.engine.runtime.configure_tvm_threads`); TVM's own
    default is half the hardware threads on x86.

    Raises:
        TargetUnavailableError: The installed TVM was built without the backend, or this
            machine has no such device, or the string is not a valid target.
    """
    import tvm
    from tvm.target import Target

    cores = int(num_cores or host_num_cores())
    text = name.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as err:
            raise TargetUnavailableError(
                f"--target {name!r} is not valid JSON ({err.msg}); pass llvm, cuda, rocm "
                'or a dict such as {"kind": "llvm", "mcpu": "skylake"}'
            ) from err
        kind = str(spec.get("kind", ""))
    else:
        kind, spec = text, None
    if kind not in TARGET_CHOICES:
        raise TargetUnavailableError(
            f"unknown target {name!r}: choose one of {', '.join(TARGET_CHOICES)} "
            "or pass a JSON target dict with one of those kinds"
        )
    if not tvm.runtime.enabled(kind):
        raise TargetUnavailableError(
            f"target {kind!r} is not enabled in the installed TVM "
            f"({tvm.__version__}); install a TVM build with {kind} support or use --target llvm"
        )
    if kind == "llvm":
        spec = spec or host_llvm_target_dict(cores)
        spec.setdefault("num-cores", cores)
        _check_llvm_cpu(spec)
        try:
            target = Target(spec)
        except Exception as err:  # TVM raises its own error types here
            raise TargetUnavailableError(f"invalid llvm target {spec}: {err}") from err
        desc = f"llvm -mcpu={spec.get('mcpu', 'generic')} ({spec['num-cores']} cores)"
        configure_tvm_threads(int(spec["num-cores"]))
        return TargetInfo(target, "llvm", "cpu", int(spec["num-cores"]), desc)

    dev = tvm.device(kind, 0)
    if not dev.exist:
        raise TargetUnavailableError(
            f"target {kind!r}: no {kind.upper()} device found on this machine; "
            "run on a machine with one or use --target llvm"
        )
    host = host_llvm_target_dict(cores)
    try:
        target = Target(spec, host=host) if spec else Target.from_device(dev)
        if not spec:
            target = Target(target, host=host)
    except Exception as err:
        raise TargetUnavailableError(f"could not build a {kind} target: {err}") from err
    return TargetInfo(target, kind, kind, cores, f"{kind} ({dev.device_name})")


def runs_here(target, device_type: str) -> bool:
    """Whether the library built for ``target`` can run on this machine (same CPU triple
    and model, or the GPU present)."""
    import tvm
    from tvm.target import codegen

    if device_type != "cpu":
        return bool(tvm.device(device_type, 0).exist)
    attrs = target.attrs
    triple = str(attrs.get("mtriple") or "") or None
    if triple and triple != str(codegen.llvm_get_system_triple()):
        return False
    mcpu = attrs.get("mcpu")
    return not mcpu or str(mcpu) == str(codegen.llvm_get_system_cpu())


def is_cross(target) -> bool:
    """Whether ``target`` is a CPU of another triple (its library cannot be linked here)."""
    from tvm.target import codegen

    if target.kind.name != "llvm":
        return False
    triple = target.attrs.get("mtriple")
    return bool(triple) and str(triple) != str(codegen.llvm_get_system_triple())
