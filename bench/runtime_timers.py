"""The deployment runtimes of :mod:`bench.runtimes`, each as a window timer on one input.

Every runtime gets the same ``nn.Module`` (the same weights) and the same NCHW float32
input: PyTorch eager and ``torch.compile`` (inductor) run the module itself; ONNX Runtime
(``CPUExecutionProvider``) and OpenVINO (CPU plugin, ``PERFORMANCE_HINT=LATENCY``) run the
ONNX file ``torch.onnx.export`` writes from it. Each runtime is given the same thread count
and reports the one it actually uses, read back from the runtime; each output is compared
with PyTorch eager's (relative max error, :func:`tuner.engine.evaluate.check_output`'s
measure). The timers are :data:`tuner.engine.timing.WindowTimer` s, so
:func:`tuner.engine.timing.interleaved` times them side by side in alternating rounds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from metatune.errors import one_line
from tuner.engine.timing import WindowTimer, interleaved, torch_timer, window_timer

#: Every runtime :func:`deploy_runtimes` can make, in the order they are timed.
RUNTIMES = ("torch", "torch_compile", "onnxruntime", "openvino_f32", "openvino_default")
#: The runtimes that read the exported ONNX file.
ONNX_RUNTIMES = ("onnxruntime", "openvino_f32", "openvino_default")
#: The ONNX opset the module is exported with.
OPSET = 17


class Runtime(NamedTuple):
    """One runtime ready to time.

    Attributes:
        timer: Its window timer (warmed up).
        output: Its output on the input (one call), for the check against PyTorch eager.
        threads: The thread count it runs with, read back from the runtime.
        precision: The inference precision it runs in (``"f32"``, ``"bf16"``, ...).
    """

    timer: WindowTimer
    output: np.ndarray
    threads: int
    precision: str = "f32"


def torch_runtime(module, x: np.ndarray, threads: int, compile: bool = False) -> Runtime:
    """PyTorch eager, or ``torch.compile`` (inductor; compiled now, in the warm-up)."""
    import torch

    torch.set_num_threads(threads)
    run = torch.compile(module) if compile else module
    timer = torch_timer(run, x, threads)  # its warm-up runs compile
    with torch.inference_mode():
        out = run(torch.from_numpy(x)).numpy()
    return Runtime(timer, out, torch.get_num_threads())


def export_onnx(module, x: np.ndarray, path: str) -> str:
    """Write ``module`` as an ONNX file (input ``input``, output ``output``, static shape).

    The TorchScript exporter (``dynamo=False``): the dynamo one needs ``onnxscript``, which
    this environment does not install.
    """
    import torch

    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), path, dynamo=False,
                          input_names=["input"], output_names=["output"],
                          opset_version=OPSET)
    return path


def ort_runtime(onnx_path: str, x: np.ndarray, threads: int) -> Runtime:
    """ONNX Runtime's ``CPUExecutionProvider``, ``intra_op_num_threads=threads`` (one
    inter-op thread: the graph runs in order), its other settings as they come."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}

    def call():
        return sess.run(None, feed)

    for _ in range(3):
        call()
    return Runtime(window_timer(call), np.asarray(call()[0]),
                   int(sess.get_session_options().intra_op_num_threads))


def openvino_config(threads: int, precision: str | None = "f32", **extra: Any) -> dict:
    """The CPU plugin's configuration the benchmarks compile with: ``PERFORMANCE_HINT=LATENCY``,
    ``threads`` inference threads, ``precision`` as ``INFERENCE_PRECISION_HINT`` (``None``:
    the plugin's default), and ``extra`` properties (e.g. ``PERF_COUNT=True``)."""
    config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads}
    if precision is not None:
        config["INFERENCE_PRECISION_HINT"] = precision
    return {**config, **extra}


def openvino_runtime(onnx_path: str, x: np.ndarray, threads: int,
                     precision: str | None = "f32") -> Runtime:
    """OpenVINO's CPU plugin with ``PERFORMANCE_HINT=LATENCY`` and ``threads`` inference
    threads.

    Args:
        onnx_path: The ONNX file.
        x: The input.
        threads: ``INFERENCE_NUM_THREADS``.
        precision: ``INFERENCE_PRECISION_HINT`` (``None``: the plugin's default, bf16 on
            CPUs that have it); the precision used is read back either way.
    """
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(onnx_path), "CPU",
                                  openvino_config(threads, precision))
    request = compiled.create_infer_request()
    feed = {0: x}

    def call():
        return request.infer(feed, share_inputs=True, share_outputs=True)

    for _ in range(3):
        call()
    out = np.array(request.infer(feed)[compiled.output(0)])
    used = compiled.get_property("INFERENCE_PRECISION_HINT")
    return Runtime(window_timer(call), out, int(compiled.get_property("INFERENCE_NUM_THREADS")),
                   used.to_string() if hasattr(used, "to_string") else str(used))


def deploy_runtimes(module, x: np.ndarray, threads: int, onnx_dir: str,
                    names: tuple[str, ...] = RUNTIMES,
                    failures: dict[str, str] | None = None) -> dict[str, Runtime]:
    """Make the runtimes ``names`` (of :data:`RUNTIMES`) of ``module`` on ``x``.

    Args:
        module: The ``nn.Module`` in eval mode (its weights are every runtime's).
        x: The input, a float32 array of the network's input shape (NCHW).
        threads: The thread count every runtime gets.
        onnx_dir: Where the ONNX file goes (ONNX Runtime and OpenVINO read it).
        names: The runtimes to make.
        failures: Where a runtime that fails to load, export or compile goes (name ->
            its error, one line), left out of the result; ``None``: the error is raised.

    Raises:
        ValueError: A name not in :data:`RUNTIMES`.
    """
    unknown = [n for n in names if n not in RUNTIMES]
    if unknown:
        raise ValueError(f"unknown runtimes {unknown}: choose from {', '.join(RUNTIMES)}")
    onnx_path = os.path.join(onnx_dir, "model.onnx")
    onnx_error = None
    if any(n in ONNX_RUNTIMES for n in names):
        try:
            export_onnx(module, x, onnx_path)
        except Exception as err:  # the exporter raises many types on what it cannot trace
            if failures is None:
                raise
            onnx_error = f"torch.onnx.export failed: {one_line(err, 200)}"
    makers: dict[str, Callable[[], Runtime]] = {
        "torch": lambda: torch_runtime(module, x, threads),
        "torch_compile": lambda: torch_runtime(module, x, threads, compile=True),
        "onnxruntime": lambda: ort_runtime(onnx_path, x, threads),
        "openvino_f32": lambda: openvino_runtime(onnx_path, x, threads, "f32"),
        "openvino_default": lambda: openvino_runtime(onnx_path, x, threads, None),
    }
    out = {}
    for name in names:
        if onnx_error and name in ONNX_RUNTIMES:
            failures[name] = onnx_error
            continue
        try:
            out[name] = makers[name]()
        except Exception as err:  # each library raises its own types
            if failures is None:
                raise
            failures[name] = f"{type(err).__name__}: {one_line(err, 200)}"
    return out


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """Max absolute difference over the largest reference magnitude (``check_output``'s
    measure, without its tolerance); ``inf`` when the shapes differ."""
    from metatune.errors import CheckFailedError
    from tuner.engine.evaluate import check_output

    try:
        return check_output(np.asarray(actual, dtype="float32"), expected, math.inf)
    except CheckFailedError:  # the shapes differ
        return math.inf


def time_side_by_side(runtimes: dict[str, Runtime], reference: np.ndarray, windows: int,
                      min_window_ms: float, rounds: int) -> dict[str, Any]:
    """Check each runtime against ``reference`` and time them all in alternating rounds
    (:func:`tuner.engine.timing.interleaved`).

    Returns:
        ``latency_ms`` (median of the windows), ``latency_windows_ms``, ``rel_error``
        (against ``reference``), ``threads`` and ``precision`` (read back), each per
        runtime name, and ``timing`` (the settings).
    """
    latency = interleaved({n: r.timer for n, r in runtimes.items()}, windows, min_window_ms,
                          rounds)
    return {
        "latency_ms": {n: lat.median_ms for n, lat in latency.items()},
        "latency_windows_ms": {n: lat.runs_ms for n, lat in latency.items()},
        "rel_error": {n: relative_error(r.output, reference) for n, r in runtimes.items()},
        "threads": {n: r.threads for n, r in runtimes.items()},
        "precision": {n: r.precision for n, r in runtimes.items()},
        "timing": {"rounds": rounds, "windows": len(next(iter(latency.values())).runs_ms),
                   "min_window_ms": min_window_ms, "order": "alternating",
                   "warm_call": True},
    }


def versions() -> dict[str, str]:
    """The versions of the runtimes' libraries."""
    import onnxruntime
    import openvino
    import torch
    import tvm

    return {"tvm": str(tvm.__version__), "torch": torch.__version__,
            "onnxruntime": onnxruntime.__version__, "openvino": openvino.__version__}
