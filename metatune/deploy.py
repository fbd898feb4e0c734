"""Run a network TVM compiled on torch tensors: DLPack in and out, no copies.

:func:`load` opens an artifact that ``tune.py --export PATH`` wrote (a directory holding
``manifest.json`` and the Relax VM executable, weights inside) and returns a
``torch.nn.Module`` that takes and returns torch tensors::

    import metatune
    model = metatune.load("alexnet.metatune")
    y = model(x)  # x: a contiguous float32 tensor of the manifest's input shape

:class:`VMFunction` is the call itself, shared with the ``torch.compile`` backend
(:mod:`tuner.app.dynamo`). TVM is imported when a network is loaded, not with this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import torch

from metatune.errors import MetaTuneError, one_line
from metatune.tvm_env import set_pool_defaults

#: The artifact's manifest file, its ``format`` and the ``format_version`` read here.
MANIFEST = "manifest.json"
ARTIFACT_FORMAT = "metatune-artifact"
FORMAT_VERSION = 1
#: TVM device name -> the ``torch.device`` type of the tensors it takes (ROCm is ``cuda``).
TORCH_DEVICE = {"cpu": "cpu", "cuda": "cuda", "rocm": "cuda"}


class ArtifactError(MetaTuneError):
    """An exported artifact that is missing, unreadable or made for another format."""


def _flatten(out) -> list:
    """The tensors of a VM result (one tensor, or a possibly nested tuple of them)."""
    if hasattr(out, "__dlpack__"):
        return [out]
    return [t for item in out for t in _flatten(item)]


#: The alignment TVM requires of a tensor's data (``kAllocAlignment``).
ALIGNMENT = 64


def _to_tvm(x: torch.Tensor):
    """``x`` (detached) as a TVM tensor: through DLPack, no copy, where TVM takes it as it
    is (contiguous, its data aligned to :data:`ALIGNMENT` bytes); else copied once.

    On the CPU the copy is numpy's, on the calling thread, into memory TVM allocates: not a
    torch copy, which for an image-sized tensor runs on torch's OpenMP pool, whose worker
    then spins for milliseconds on a core that the network's TVM threads need (issue 62:
    mobilenet-v2 on a 2-core CPU, docs/deploy.md). A dtype numpy lacks (bfloat16) and
    other devices are copied by torch.
    """
    import tvm

    if x.is_contiguous() and x.data_ptr() % ALIGNMENT == 0:
        return tvm.runtime.from_dlpack(x)
    if x.device.type == "cpu":
        try:
            array = x.numpy()
        except (TypeError, RuntimeError):  # bfloat16; a conjugate or negative view
            pass
        else:
            return tvm.runtime.tensor(array, tvm.cpu(0))
    x = x.contiguous()
    return tvm.runtime.from_dlpack(x if x.data_ptr() % ALIGNMENT == 0 else x.clone())


class VMFunction:
    """A Relax VM function called on torch tensors.

    Inputs are handed to TVM through DLPack (no copy, except for a tensor TVM cannot take as
    it is: one not contiguous, or whose data is not aligned to :data:`ALIGNMENT` bytes, as a
    ``torch.from_numpy`` tensor may be, is copied first, on the CPU by numpy:
    :func:`_to_tvm`), outputs come back the same way: the returned tensors own the memory
    the VM allocated for them.

    Args:
        vm: A ``tvm.runtime.vm.VirtualMachine``.
        device_type: The TVM device it runs on (``"cpu"``, ``"cuda"``, ``"rocm"``).
        function: The VM function to call.
        inputs: Optional ``[{"shape": [...], "dtype": "float32"}, ...]`` to check each call's
            inputs against (an artifact's manifest); ``None`` checks nothing.
    """

    def __init__(self, vm, device_type: str, function: str = "main",
                 inputs: Sequence[dict] | None = None) -> None:
        self.vm = vm
        self.function = vm[function]
        self.device_type = device_type
        self.torch_device = TORCH_DEVICE.get(device_type, device_type)
        self.inputs = list(inputs) if inputs is not None else None

    def _check(self, args: Sequence[torch.Tensor]) -> None:
        """Raise ``ValueError`` naming the first input that does not fit the signature."""
        if len(args) != len(self.inputs):
            raise ValueError(f"the compiled network takes {len(self.inputs)} input(s), "
                             f"got {len(args)}")
        for i, (x, spec) in enumerate(zip(args, self.inputs, strict=False)):
            want_dtype = str(spec.get("dtype", "float32"))
            if not isinstance(x, torch.Tensor):
                raise ValueError(f"input {i} is a {type(x).__name__}, not a torch.Tensor")
            if list(x.shape) != list(spec["shape"]) or str(x.dtype) != f"torch.{want_dtype}":
                raise ValueError(
                    f"input {i} is {tuple(x.shape)} {x.dtype}, but the network was compiled "
                    f"for {tuple(spec['shape'])} {want_dtype} (static shapes: export it again "
                    "for another shape)")

    def __call__(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Run the function on torch tensors.

        Args:
            *args: The inputs, on the device the network was compiled for.

        Returns:
            The outputs, as torch tensors on the same device.

        Raises:
            ValueError: An input on another device (or, with ``inputs``, of another shape
                or dtype).
        """
        if self.inputs is not None:
            self._check(args)
        tvm_args = []
        for i, x in enumerate(args):
            if x.device.type != self.torch_device:
                raise ValueError(f"input {i} is on {x.device}, but the network was compiled "
                                 f"for {self.device_type}: move it with .to("
                                 f"{self.torch_device!r})")
            tvm_args.append(_to_tvm(x.detach()))
        return tuple(torch.from_dlpack(t) for t in _flatten(self.function(*tvm_args)))


class CompiledModule(torch.nn.Module):
    """A compiled network as a ``torch.nn.Module``: ``forward`` takes and returns tensors.

    It holds no parameters (the weights are constants of the executable) and runs on the
    device it was compiled for; ``.to()`` and ``.eval()`` change nothing it computes.

    Args:
        function: The :class:`VMFunction` to call.
        manifest: The artifact's manifest (kept as :attr:`manifest`), if any.
    """

    def __init__(self, function: VMFunction, manifest: dict | None = None) -> None:
        super().__init__()
        self.function = function
        self.manifest = manifest or {}
        self.eval()

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Run the network: one tensor when it has one output, else a tuple."""
        outputs = self.function(*inputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def extra_repr(self) -> str:
        shapes = ", ".join(str(tuple(i["shape"])) for i in self.manifest.get("inputs", []))
        return (f"network={self.manifest.get('network')!r}, device={self.function.device_type}"
                + (f", inputs={shapes}" if shapes else ""))


def read_manifest(path: str) -> dict:
    """The manifest of an artifact directory, checked.

    Raises:
        ArtifactError: No such directory or manifest, unreadable JSON, or another format.
    """
    if not os.path.isdir(path):
        raise ArtifactError(f"{path!r} is not an exported artifact directory (no such "
                            "directory); make one with tune.py --export PATH")
    file = os.path.join(path, MANIFEST)
    try:
        with open(file, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError as err:
        raise ArtifactError(f"{path!r} has no {MANIFEST}: not an artifact of tune.py "
                            "--export (export it again)") from err
    except (OSError, ValueError) as err:
        raise ArtifactError(f"cannot read {file!r} ({one_line(err, 160)}); export the "
                            "network again") from err
    if not isinstance(manifest, dict) or manifest.get("format") != ARTIFACT_FORMAT:
        raise ArtifactError(f"{file!r} is not a {ARTIFACT_FORMAT} manifest")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise ArtifactError(f"{path!r} has format_version {version!r}; this MetaTune reads "
                            f"version {FORMAT_VERSION}: export it again with this version")
    missing = [k for k in ("library", "device", "inputs") if k not in manifest]
    if missing:
        raise ArtifactError(f"{file!r} lacks {', '.join(missing)}; export the network again")
    return manifest


def load(path: str | os.PathLike) -> CompiledModule:
    """Load an artifact of ``tune.py --export PATH`` as a ``torch.nn.Module``.

    Args:
        path: The artifact directory (``manifest.json`` and the library).

    Returns:
        A :class:`CompiledModule`: ``model(x)`` takes torch tensors of the manifest's input
        shapes and dtypes, on its device (``model.manifest["device"]``), and returns torch
        tensors (one tensor for one output, else a tuple).

    TVM's thread pool, when this is the first TVM code the process runs and
    ``TVM_NUM_THREADS`` is unset, gets the target's cores (its ``num-cores``, at most this
    machine's; :func:`metatune.tvm_env.set_pool_defaults`); TVM's own default is half the
    hardware threads.

    Raises:
        ArtifactError: The directory is not a readable artifact, or TVM cannot load its
            library (e.g. built for another CPU or device).
    """
    path = os.fspath(path)
    manifest = read_manifest(path)
    library = os.path.join(path, manifest["library"])
    if not os.path.isfile(library):
        raise ArtifactError(f"{path!r}: its library {manifest['library']!r} is missing; "
                            "export the network again")
    cores = (manifest.get("target_json") or {}).get("num-cores")
    set_pool_defaults(int(cores) if isinstance(cores, int) and cores > 0 else None)
    import tvm

    try:
        lib = tvm.runtime.load_module(library)
        vm = tvm.runtime.vm.VirtualMachine(lib, tvm.device(manifest["device"], 0))
        function = VMFunction(vm, manifest["device"], manifest.get("function", "main"),
                              manifest["inputs"])
    except Exception as err:  # TVM raises its own error types
        raise ArtifactError(
            f"TVM cannot load {library!r} on {manifest['device']} ({one_line(err, 200)}); it "
            f"was built for {manifest.get('target', 'an unknown target')}: export it on (or "
            "for) this machine") from err
    return CompiledModule(function, manifest)
