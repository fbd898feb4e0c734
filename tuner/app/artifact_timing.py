"""Time an exported artifact where it will run: here, or on a server behind a TVM RPC tracker.

Over RPC the library is uploaded and loaded by the server (a cross target's ``model.tar``
is linked there), and the VM is timed through its stateful API (``set_input`` then
``invoke_stateful``: a function that returns a tuple cannot be timed over RPC directly).
Only ``tvm`` and numpy are used, as on the device.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
from dataclasses import fields
from typing import Any

import numpy as np

from metatune.errors import ConfigError, RunnerUnavailableError, one_line
from metatune.files import write_json_atomic
from tuner.app.artifact import FUNCTION, MANIFEST_FILE
from tuner.engine.rpc import RPCSettings

logger = logging.getLogger("metatune")


def _inputs(manifest: dict[str, Any], dev) -> list:
    """Reproducible random inputs of the manifest's shapes and dtypes, on ``dev``."""
    import tvm

    rng = np.random.default_rng(0)
    return [tvm.runtime.tensor(rng.standard_normal(i["shape"]).astype(i["dtype"]), dev)
            for i in manifest["inputs"]]


def _remote_vm(path: str, manifest: dict[str, Any], rpc: RPCSettings):
    """Upload the library to a server under ``rpc.key`` and load it there: ``(vm, dev)``.

    Raises:
        RunnerUnavailableError: No tracker, no server, or the server cannot load it.
    """
    import tvm
    from tvm import rpc as tvm_rpc

    where = f"key {rpc.key!r} of the tracker {rpc.tracker_host}:{rpc.tracker_port}"
    try:
        tracker = tvm_rpc.connect_tracker(rpc.tracker_host, rpc.tracker_port)
        remote = tracker.request(rpc.key, priority=1,
                                 session_timeout=int(rpc.session_timeout_sec) or 60)
    except Exception as err:  # TVM raises its own types (and TimeoutError) here
        raise RunnerUnavailableError(f"no RPC server to time the artifact on ({where}: "
                                     f"{one_line(err, 160)}); start a tracker and a server "
                                     "(README: Measuring on other machines)") from err
    try:
        remote.upload(os.path.join(path, manifest["library"]))
        lib = remote.load_module(manifest["library"])
        dev = remote.device(manifest["device"], 0)
        return tvm.runtime.vm.VirtualMachine(lib, dev), dev
    except Exception as err:  # the server's own errors come back as TVM errors
        raise RunnerUnavailableError(f"the RPC server ({where}) cannot load the artifact "
                                     f"({one_line(err, 200)})") from err


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
    if rpc is None:
        dev = tvm.device(manifest["device"], 0)
        lib = tvm.runtime.load_module(os.path.join(path, manifest["library"]))
        vm, where = tvm.runtime.vm.VirtualMachine(lib, dev), "local"
    else:
        vm, dev = _remote_vm(path, manifest, rpc)
        where = f"rpc {rpc.key}@{rpc.tracker_host}:{rpc.tracker_port}"
    vm.set_input(FUNCTION, *_inputs(manifest, dev))
    timer = vm.time_evaluator("invoke_stateful", dev, number=1, repeat=repeat,
                              min_repeat_ms=min_repeat_ms)
    runs = [r * 1e3 for r in timer(FUNCTION).results]
    return {"where": where, "median_ms": statistics.median(runs), "runs_ms": runs,
            "min_repeat_ms": min_repeat_ms}


def timing_settings(config: dict[str, Any], runner: str | None,
                    rpc: dict | None) -> RPCSettings | None:
    """Where to time the artifact: ``None`` here, else the RPC settings (the work dir's
    ``runner``, with ``runner`` and ``rpc`` replacing its kind and settings).

    Raises:
        ConfigError: An unknown runner, or bad RPC settings.
    """
    runner_cfg = config.get("runner") or {}
    kind = str(runner or runner_cfg.get("kind") or "local").lower()
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
