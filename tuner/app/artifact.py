"""The exported artifact: one directory with the compiled network and its ``manifest.json``.

The directory holds ``model.so`` (the Relax VM executable, ``export_library``; the weights,
packed by the tuned schedules, are constants inside it) and ``manifest.json`` (target,
input and output signature, provenance, and :data:`LOAD_SNIPPET`). It loads with
``tvm.runtime`` and numpy alone: no torch, no MetaTune. A cross target (an ``mtriple`` this
machine does not run) gets ``model.tar`` instead, the object files that
``tvm.runtime.load_module`` links on the device, unless a cross compiler is given.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import Any

# One definition of the format, shared with its reader (metatune.load).
from metatune.deploy import ARTIFACT_FORMAT
from metatune.deploy import MANIFEST as MANIFEST_FILE
from metatune.errors import ConfigError
from metatune.files import write_json_atomic

LIBRARY_FILE = "model.so"
CROSS_LIBRARY_FILE = "model.tar"
FUNCTION = "main"

#: How to run an artifact with ``tvm.runtime`` and numpy only (``d``: its directory). TVM
#: reads ``TVM_NUM_THREADS`` when it first runs a kernel; unset, it runs half the hardware
#: threads (one on a 2-core machine), so the snippet gives it the target's cores, at most
#: the machine's.
LOAD_SNIPPET = """\
import json, os, numpy as np, tvm
d = "alexnet.metatune"  # the exported directory
m = json.load(open(f"{d}/manifest.json"))
n = os.cpu_count()
os.environ.setdefault("TVM_NUM_THREADS", str(min(m["target_json"].get("num-cores", n), n)))
dev = tvm.device(m["device"], 0)
vm = tvm.runtime.vm.VirtualMachine(tvm.runtime.load_module(f"{d}/{m['library']}"), dev)
x = np.random.rand(*m["inputs"][0]["shape"]).astype(m["inputs"][0]["dtype"])
out = vm[m["function"]](tvm.runtime.tensor(x, dev))
y = (out[0] if m["output_tuple"] else out).numpy()
"""


def is_artifact(path: str) -> bool:
    """Whether ``path`` is a directory holding an artifact's ``manifest.json``."""
    try:
        with open(os.path.join(path, MANIFEST_FILE), encoding="utf-8") as f:
            return json.load(f).get("format") == ARTIFACT_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def check_out_path(out: str, overwrite: bool) -> None:
    """Refuse an output path that holds something, unless ``overwrite`` allows replacing it.

    An empty directory is used as it is; with ``overwrite``, an artifact directory or a
    file is replaced, but a non-empty directory that is not an artifact never is.

    Raises:
        ConfigError: One line saying what is in the way and what to pass instead.
    """
    if not os.path.lexists(out):
        return
    if os.path.isdir(out) and not os.path.islink(out):
        if not os.listdir(out):
            return
        if not is_artifact(out):
            raise ConfigError(f"export path {out} is a non-empty directory that is not a "
                              "MetaTune artifact (no manifest.json): pass another path (it is "
                              "never replaced, not even with overwrite)")
    if not overwrite:
        raise ConfigError(f"export path {out} exists and is not empty: pass --overwrite "
                          "(tune.py: export_overwrite=true) to replace it, or another path")


def _dims(shape) -> list[int]:
    """Static dims of a Relax shape (a tuple of ``IntImm`` or a ``ShapeExpr``)."""
    values = getattr(shape, "values", shape)
    try:
        return [int(d) for d in values]
    except (TypeError, ValueError) as err:
        raise ConfigError(f"the network has a dynamic shape {shape}: export needs static "
                          "shapes (tune with a fixed --input-shape and --batch)") from err


def signature(relax_mod) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """The inputs and outputs of the network's ``main``, from its Relax types.

    Returns:
        ``(inputs, outputs, output_tuple)``: ``[{"name", "shape", "dtype"}]`` in argument
        order, ``[{"shape", "dtype"}]``, and whether ``main`` returns a tuple.
    """
    func = relax_mod[FUNCTION]
    inputs = [{"name": str(p.name), "shape": _dims(p.ty.shape), "dtype": str(p.ty.dtype)}
              for p in func.params]
    ret = func.ret_ty
    fields = getattr(ret, "fields", None)
    output_tuple = fields is not None
    outputs = [{"shape": _dims(t.shape), "dtype": str(t.dtype)}
               for t in (fields if output_tuple else [ret])]
    return inputs, outputs, output_tuple


def export_library(executable, directory: str, *, cross: bool = False,
                   cross_cc: str | None = None) -> str:
    """Write the ``relax.build`` result into ``directory`` as the library a device loads:
    ``model.so``, or for a cross target without a cross compiler ``model.tar`` (the object
    files, linked by ``tvm.runtime.load_module`` on the device).

    Args:
        executable: The ``relax.build`` result (``tvm.runtime.Executable``).
        directory: An existing directory.
        cross: The target is not this machine's triple
            (:func:`tuner.engine.targets.is_cross`).
        cross_cc: A cross compiler (e.g. ``aarch64-linux-gnu-g++``) that links ``model.so``
            for a cross target.

    Returns:
        The library's path.
    """
    name = CROSS_LIBRARY_FILE if cross and not cross_cc else LIBRARY_FILE
    kwargs = {}
    if cross and cross_cc:
        from tvm.support import cc

        kwargs["fcompile"] = cc.cross_compiler(cross_cc)
    library = os.path.join(directory, name)
    executable.export_library(library, **kwargs)
    return library


def write_artifact(out: str, executable, manifest: dict[str, Any], *, overwrite: bool,
                   cross_cc: str | None = None, cross: bool = False,
                   verify: Callable[[str], float | None] | None = None) -> str:
    """Write the library and ``manifest.json`` into ``out``, atomically.

    Everything is written into a sibling temporary directory first, which then takes
    ``out``'s place: a failed export leaves ``out`` as it was.

    Args:
        out: The artifact directory.
        executable: The ``relax.build`` result (``tvm.runtime.Executable``).
        manifest: The manifest, without ``library`` (filled in here).
        overwrite: Replace an artifact (or file) already at ``out``.
        cross_cc: A cross compiler (e.g. ``aarch64-linux-gnu-g++``) to link ``model.so``
            for a cross target.
        cross: The target is not this machine's: without ``cross_cc``, write ``model.tar``.
        verify: Called with the written library's path before the manifest is written;
            what it returns is the manifest's ``check_error``. What it raises leaves ``out``
            as it was.

    Returns:
        The library's path.

    Raises:
        ConfigError: ``out`` is in the way (:func:`check_out_path`).
    """
    check_out_path(out, overwrite)
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(out)}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        library = export_library(executable, tmp, cross=cross, cross_cc=cross_cc)
        name = os.path.basename(library)
        manifest = {**manifest, "library": name}
        if verify is not None:
            manifest["check_error"] = verify(library)
        write_json_atomic(os.path.join(tmp, MANIFEST_FILE), manifest, indent=1)
        _replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return os.path.join(out, name)


def _replace(tmp: str, out: str) -> None:
    """Move ``tmp`` to ``out``; what was at ``out`` (checked by :func:`check_out_path`) is
    removed only once the new directory is in place."""
    old = None
    if os.path.lexists(out):
        old = f"{tmp}.old"
        os.rename(out, old)
    try:
        os.rename(tmp, out)
    except OSError:
        if old is not None:
            os.rename(old, out)
        raise
    if old is not None:
        if os.path.isdir(old) and not os.path.islink(old):
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.remove(old)
