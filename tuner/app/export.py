"""``run_export(cfg)``: compile a tuned work dir into an artifact that runs without MetaTune.

The network is imported again as the work dir's ``report.json`` names it (the same
built-in network, ``--model`` factory or ONNX file, input shape, batch, batch-norm
folding, layout and weight packing; random weights are seeded as ``tune.py`` seeds them),
built exactly as ``tune.py``'s final compile (:func:`tuner.engine.evaluate.build_network`,
with the measured schedules first, then ``predicted/``), checked against its reference,
and written as an artifact directory (:mod:`tuner.app.artifact`).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

from metatune.config import resolve_path
from metatune.deploy import ARTIFACT_FORMAT, FORMAT_VERSION
from metatune.errors import WorkDirError
from tuner.app.artifact import (
    FUNCTION,
    LOAD_SNIPPET,
    MANIFEST_FILE,
    check_out_path,
    signature,
    write_artifact,
)
from tuner.app.preflight import read_settings
from tuner.engine.database import RECORD_FILE, record_targets
from tuner.engine.targets import is_cross, runs_here
from tuner.engine.tasks import Lowering

logger = logging.getLogger("metatune")

REPORT_FILE = "report.json"
PREDICTED_RECORDS = os.path.join("predicted", RECORD_FILE)


@dataclass
class ExportConfig:
    """What ``export.py`` does.

    Attributes:
        work_dir: A work dir ``tune.py`` finished (its database and ``report.json``).
        out: The artifact directory (``None``: ``<network>.metatune`` in the current
            directory).
        overwrite: Replace an artifact (or file) already at ``out``.
        check: Run the exported library on an example input and compare it with the
            reference (PyTorch or ONNX), as ``tune.py``'s evaluation does.
        cross_cc: A cross compiler (e.g. ``aarch64-linux-gnu-g++``) that links ``model.so``
            for a target this machine does not run (else ``model.tar`` is written).
        time: Time the written artifact (:mod:`tuner.app.artifact_timing`) and record it in
            the manifest (``timing``).
        runner: Where to time it: ``local`` or ``rpc`` (``None``: where ``tune.py`` timed
            the work dir's network, its ``evaluate.runner``, else its ``runner.kind``).
        rpc: ``runner.rpc`` settings to replace the work dir's (e.g. ``{"key": "pi"}``).
    """

    work_dir: str
    out: Optional[str] = None
    overwrite: bool = False
    check: bool = True
    cross_cc: Optional[str] = None
    time: bool = False
    runner: Optional[str] = None
    rpc: Optional[dict] = None


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return [line for line in f if line.strip()]
    except OSError:
        return []


def read_work_dir(work_dir: str) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The finished run's report, its settings and how many records its database holds.

    Raises:
        WorkDirError: No such directory, no tuning records, or no ``report.json``.
    """
    if not os.path.isdir(work_dir):
        raise WorkDirError(f"work dir {work_dir} does not exist: pass the --work-dir of a "
                           "finished tune.py run")
    records = len(_lines(os.path.join(work_dir, RECORD_FILE)))
    if not records:
        raise WorkDirError(f"work dir {work_dir} has no tuning records ({RECORD_FILE} is "
                           "missing or empty): tune it first, python tune.py ... --work-dir "
                           f"{work_dir}")
    try:
        with open(os.path.join(work_dir, REPORT_FILE), encoding="utf-8") as f:
            report = json.load(f)
        config = report["config"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise WorkDirError(f"work dir {work_dir} has no readable {REPORT_FILE} (tuning did not "
                           "finish): rerun the same tune.py command, it resumes and writes "
                           "the report") from err
    if not isinstance(config, dict):
        raise WorkDirError(f"{os.path.join(work_dir, REPORT_FILE)} has no config: rerun the "
                           "same tune.py command to rewrite it")
    return report, read_settings(work_dir) or {}, records


def build_target(config: dict[str, Any], work_dir: str):
    """The target to compile for: the configured JSON target (e.g. a cross target with
    ``mtriple``) as given, else the exact target the records were measured for (the tuning
    machine's CPU, not this one's), else ``--target`` resolved here.

    Returns:
        ``(tvm.target.Target, device_type)``.
    """
    from tvm.target import Target

    text = str(config.get("target") or "llvm").strip()
    measured = (t for t, _ in record_targets(work_dir) if t.get("kind"))  # one (tune.py)
    spec = json.loads(text) if text.startswith("{") else next(measured, None)
    if spec is None:
        from tuner.engine.targets import resolve_target

        info = resolve_target(text, config.get("num_cores"))
        return info.target, info.device_type
    kind = str(spec.get("kind"))
    if kind != "llvm" and "host" not in spec:
        from tuner.engine.targets import host_llvm_target_dict

        return Target(spec, host=host_llvm_target_dict(config.get("num_cores"))), kind
    return Target(spec), "cpu" if kind == "llvm" else kind


def provenance(work_dir: str, report: dict[str, Any], settings: dict[str, Any],
               records: int) -> dict[str, Any]:
    """Where the artifact's schedules and weights come from, and where it was made."""
    import tvm

    from metatune.provenance import code_version, machine_info

    config = report.get("config") or {}
    sources = Counter(t.get("schedule") for t in report.get("tasks") or [])
    if config.get("onnx"):
        weights = "the ONNX file's initializers"
    else:
        import torch

        weights = (f"built by {config.get('model') or config.get('network')} after "
                   f"torch.manual_seed(0), as tune.py builds it (torch {torch.__version__})")
    return {
        "work_dir": work_dir,
        "records": records,
        "predicted": len(_lines(os.path.join(work_dir, PREDICTED_RECORDS))),
        "tasks": {k: sources.get(k, 0) for k in ("measured", "predicted", "default")},
        "preset": report.get("preset"),
        "cost_model": report.get("cost_model"),
        "search": report.get("search"),
        "graph": report.get("graph"),
        "checkpoint": settings.get("model"),
        "layout": config.get("layout"),
        "pack_weights": config.get("pack_weights"),
        "fold_bn": config.get("fold_bn"),
        "source": {k: config.get(k) for k in ("network", "onnx", "model", "input_shape",
                                             "batch")},
        "weights": weights,
        "tuned_on": report.get("machine"),
        "exported_on": machine_info(),
        "tvm": str(tvm.__version__),
        "code": code_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _check_library(library: str, network, device_type: str, rtol: float) -> float:
    """Run the written library on the network's example input; its relative max error
    against the reference (:func:`tuner.engine.evaluate.check_output`).

    Raises:
        CheckFailedError: The error exceeds ``rtol``.
    """
    import tvm

    from tuner.engine.evaluate import check_output, first_output

    dev = tvm.device(device_type, 0)
    vm = tvm.runtime.vm.VirtualMachine(tvm.runtime.load_module(library), dev)
    x = network.example_input()
    out = first_output(vm[FUNCTION](tvm.runtime.tensor(x, dev)))
    return check_output(out, network.reference(x), rtol)


def export_network(out: str, *, network, target, device_type: str, database,
                   lowering: Lowering, provenance: dict[str, Any], overwrite: bool = False,
                   rtol: float | None = 1e-3, cross_cc: str | None = None
                   ) -> tuple[str, dict[str, Any]]:
    """Compile ``network`` with ``database``'s schedules and write the artifact at ``out``.

    Args:
        out: The artifact directory.
        network: The :class:`tuner.engine.networks.Network` (as tuned).
        target: The ``tvm.target.Target`` it was tuned for.
        device_type: ``"cpu"``, ``"cuda"``, ``"rocm"``.
        database: Measured schedules, backed by the predicted ones
            (:func:`tuner.search.zero_shot.with_predictions`).
        lowering: The tuning's weight packing and layout.
        provenance: :func:`provenance`'s record.
        overwrite: Replace an artifact already at ``out``.
        rtol: Check the written library against the reference with this tolerance
            (``None``: no check). Skipped where it cannot run here (another CPU or triple).
        cross_cc: Cross compiler for a target of another triple.

    Returns:
        ``(artifact directory, the manifest written)``.

    Raises:
        ConfigError: ``out`` is in the way.
        CheckFailedError: The exported library's output differs from the reference.
    """
    from tuner.engine.evaluate import build_network
    from tuner.engine.precision import rtol_for

    check_out_path(out, overwrite)
    executable = build_network(network.relax_mod, target, database, lowering)
    if rtol is not None:  # bf16's rounding is within its own tolerance
        rtol = rtol_for(lowering.precision, rtol)
    inputs, outputs, output_tuple = signature(network.relax_mod)
    checked = rtol is not None and runs_here(target, device_type)
    if rtol is not None and not checked:
        logger.info("export: the library is for %s, not this machine: not run here", target)
    manifest: dict[str, Any] = {
        "format": ARTIFACT_FORMAT, "format_version": FORMAT_VERSION, "function": FUNCTION,
        "device": device_type, "target": str(target), "target_json": _plain(target.export()),
        "inputs": inputs, "outputs": outputs, "output_tuple": output_tuple,
        "network": network.name, "precision": lowering.precision, "check_error": None,
        "load_snippet": LOAD_SNIPPET,
        "provenance": provenance,
    }

    def verify(library: str) -> float | None:
        return _check_library(library, network, device_type, rtol) if checked else None

    path = write_artifact(out, executable, manifest, overwrite=overwrite,
                          cross_cc=cross_cc, cross=is_cross(target), verify=verify)
    out = os.path.dirname(path)
    logger.info("exported %s to %s", network.name, out)
    with open(os.path.join(out, MANIFEST_FILE), encoding="utf-8") as f:
        return out, json.load(f)


def _plain(obj):
    """A target's export (TVM maps and arrays, tuples) as plain JSON values."""
    if hasattr(obj, "items"):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) or type(obj).__name__ == "Array":
        return [_plain(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def default_out(report: dict[str, Any]) -> str:
    """``<network>.metatune`` in the current directory."""
    name = str(report.get("network") or "network").split(":")[-1]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return resolve_path(f"{safe}.metatune")


def run_export(cfg: ExportConfig) -> tuple[str, dict[str, Any]]:
    """Compile a finished work dir into an artifact, without tuning again.

    Returns:
        ``(artifact directory, its manifest)``.

    Raises:
        metatune.errors.MetaTuneError: No such work dir, no records, no report, the output
            path in the way, a network that no longer imports, or a failed check; one line.
    """
    from metatune.errors import register_ffi_errors
    from tuner.engine.database import open_database
    from tuner.engine.networks import load_network
    from tuner.search.zero_shot import with_predictions

    register_ffi_errors()
    work_dir = resolve_path(cfg.work_dir)
    report, settings, records = read_work_dir(work_dir)
    out = resolve_path(cfg.out) if cfg.out else default_out(report)
    check_out_path(out, cfg.overwrite)  # before the slow import and compile
    config = report["config"]
    timing_rpc = None
    if cfg.time:
        from tuner.app.artifact_timing import time_into_manifest, timing_settings

        timing_rpc = timing_settings(config, cfg.runner, cfg.rpc)
    if timing_rpc is not None:
        from tuner.engine.rpc import check_tracker

        check_tracker(timing_rpc)  # a tracker or server missing: said before the compile
    target, device_type = build_target(config, work_dir)
    shape = config.get("input_shape")
    network = load_network(config.get("network"), onnx_path=config.get("onnx"),
                           model_spec=config.get("model"),
                           input_shape=tuple(shape) if shape else None,
                           batch=int(config.get("batch") or 1),
                           fold_bn=bool(config.get("fold_bn", True)))
    lowering = Lowering(pack_weights=bool(config.get("pack_weights", True)),
                        layout=str(config.get("layout") or settings.get("layout") or "NCHW"),
                        precision=str(config.get("precision") or "fp32"))
    database = with_predictions(open_database(work_dir), work_dir)
    rtol = float((config.get("evaluate") or {}).get("rtol", 1e-3)) if cfg.check else None
    out, manifest = export_network(out, network=network, target=target,
                                   device_type=device_type, database=database,
                                   lowering=lowering,
                                   provenance=provenance(work_dir, report, settings, records),
                                   overwrite=cfg.overwrite, rtol=rtol, cross_cc=cfg.cross_cc)
    if cfg.time:
        manifest = time_into_manifest(out, manifest, config, timing_rpc)
    return out, manifest


def export_run(out: str, *, report: dict[str, Any], network, target_info, database,
               lowering: Lowering, work_dir: str, overwrite: bool, rtol: float | None
               ) -> tuple[str, dict[str, Any]]:
    """``tune.py --export``: the artifact of the run that just finished (its network,
    target and database as they are in memory)."""
    _, settings, records = read_work_dir(work_dir)
    return export_network(out, network=network, target=target_info.target,
                          device_type=target_info.device_type, database=database,
                          lowering=lowering,
                          provenance=provenance(work_dir, report, settings, records),
                          overwrite=overwrite, rtol=rtol)
