"""Time an exported artifact where it will run: here, or on a server behind a TVM RPC tracker.

Over RPC the library is uploaded and loaded by the server (a cross target's ``model.tar``
is linked there) and timed there (:class:`tuner.engine.remote.RemoteNetwork`); here, the
same stateful VM calls are timed (:func:`tuner.engine.remote.stateful_timer`). Only
``tvm`` and numpy are used, as on the device. ``tune.py``'s evaluation with
``evaluate.runner=rpc`` loads its build on the device the same way (:func:`loaded_on`).
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

import numpy as np

from metatune.errors import ConfigError
from metatune.files import write_json_atomic
from tuner.app.artifact import FUNCTION, MANIFEST_FILE, export_library
from tuner.engine.remote import RemoteNetwork, stateful_timer
from tuner.engine.rpc import RPCSettings

logger = logging.getLogger("metatune")


def _inputs(manifest: dict[str, Any]) -> list[np.ndarray]:
    """Reproducible random inputs of the manifest's shapes and dtypes."""
    rng = np.random.default_rng(0)
    return [rng.standard_normal(i["shape"]).astype(i["dtype"]) for i in manifest["inputs"]]


def time_artifact(path: str, *, rpc: RPCSettings | None = None, repeat: int = 10,
                  min_repeat_ms: int = 200) -> dict[str, Any]:
    """Latency of the artifact's ``main`` on random inputs, here or over RPC.

    Args:
        path: The artifact directory.
        rpc: Time it on a server behind this tracker (``None``: on this machine).
        repeat: Timed windows.
        min_repeat_ms: Each window runs ``main`` back to back for at least this long.

    Returns:
        ``{"where", "median_ms", "runs_ms", "min_repeat_ms"}``: ``runs_ms`` holds each
        window's mean latency of one call.

    Raises:
        RunnerUnavailableError: Over RPC: no server, or it cannot load the library.
    """
    import tvm

    with open(os.path.join(path, MANIFEST_FILE), encoding="utf-8") as f:
        manifest = json.load(f)
    library = os.path.join(path, manifest["library"])
    if rpc is None:
        dev = tvm.device(manifest["device"], 0)
        vm = tvm.runtime.vm.VirtualMachine(tvm.runtime.load_module(library), dev)
        inputs = [tvm.runtime.tensor(a, dev) for a in _inputs(manifest)]
        timer, where = stateful_timer(vm, dev, inputs, FUNCTION), "local"
    else:
        remote = RemoteNetwork(library, manifest["device"], rpc)
        timer, where = remote.timer(*_inputs(manifest)), remote.where
    runs = timer(repeat, min_repeat_ms)
    return {"where": where, "median_ms": statistics.median(runs), "runs_ms": runs,
            "min_repeat_ms": min_repeat_ms}


@contextmanager
def loaded_on(rpc: RPCSettings, device_type: str, *, cross: bool) -> Iterator:
    """A loader of ``relax.build`` results onto a server of ``rpc``: each is written as an
    artifact's library would be (:func:`tuner.app.artifact.export_library`, ``model.tar``
    for a cross target) into a temporary directory, uploaded and loaded there.

    Yields:
        ``load(executable) -> RemoteNetwork``.

    Raises:
        RunnerUnavailableError: (from ``load``) no server, or it cannot load the library.
    """
    with tempfile.TemporaryDirectory(prefix="metatune-rpc-") as tmp:
        count = 0

        def load(executable) -> RemoteNetwork:
            nonlocal count
            count += 1
            directory = os.path.join(tmp, str(count))
            os.makedirs(directory)
            return RemoteNetwork(export_library(executable, directory, cross=cross),
                                 device_type, rpc)

        yield load


def timing_settings(config: dict[str, Any], runner: str | None,
                    rpc: dict | None) -> RPCSettings | None:
    """Where to time the artifact: ``None`` here, else the RPC settings. ``runner``
    ``None`` times it where ``tune.py`` timed the work dir's network (its
    ``evaluate.runner``, else its ``runner.kind``); ``rpc`` replaces settings of its
    ``runner.rpc``.

    Raises:
        ConfigError: An unknown runner, or bad RPC settings.
    """
    runner_cfg = config.get("runner") or {}
    timed = (config.get("evaluate") or {}).get("runner")
    kind = str(runner or timed or runner_cfg.get("kind") or "local").lower()
    if kind not in ("local", "rpc"):
        raise ConfigError(f"--runner {kind!r}: choose local or rpc")
    if kind == "local":
        return None
    names = {f.name for f in fields(RPCSettings)}
    return RPCSettings(**{k: v for k, v in {**(runner_cfg.get("rpc") or {}),
                                            **(rpc or {})}.items() if k in names})


def time_into_manifest(out: str, manifest: dict[str, Any], config: dict[str, Any],
                       rpc: RPCSettings | None) -> dict[str, Any]:
    """Time the artifact with the work dir's ``evaluate`` settings, here (``rpc`` ``None``)
    or on a server of ``rpc`` (:class:`tuner.engine.rpc.RPCSettings`), and add ``timing``
    to its manifest.

    Raises:
        RunnerUnavailableError: Over RPC: no server, or it cannot load the library.
    """
    ecfg = config.get("evaluate") or {}
    timing = time_artifact(out, rpc=rpc, repeat=int(ecfg.get("repeat", 10)),
                           min_repeat_ms=int(ecfg.get("min_repeat_ms", 200)))
    logger.info("export: %s on %s: median %.3f ms", manifest["network"], timing["where"],
                timing["median_ms"])
    manifest = {**manifest, "timing": timing}
    write_json_atomic(os.path.join(out, MANIFEST_FILE), manifest, indent=1)
    return manifest
