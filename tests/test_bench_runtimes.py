"""The runtimes page (``bench.runtimes``) from a synthetic record, and a real side-by-side
timing of a tiny network through PyTorch, ONNX Runtime and OpenVINO."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from bench import runtimes
from bench.runtime_timers import deploy_runtimes, time_side_by_side


def _record(network: str, tuned: float, ort: float, ov: float) -> dict:
    names = list(runtimes.LABELS)
    lat = {"tvm_tuned": tuned, "torch": 10.0, "torch_compile": 8.0, "onnxruntime": ort,
           "openvino_f32": ov, "openvino_default": 3.0}
    return {"network": network, "budget": 128, "platform": "llvm-znver4",
            "latency_ms": lat, "latency_windows_ms": {n: [v, v] for n, v in lat.items()},
            "rel_error": {**{n: 1e-6 for n in names}, "torch": 0.0, "openvino_default": 2e-2},
            "threads": {n: 2 for n in names},
            "precision": {**{n: "f32" for n in names}, "openvino_default": "bf16"},
            "timing": {"rounds": 5, "windows": 10, "min_window_ms": 200, "order": "alternating",
                       "warm_call": True},
            "failures": {}, "target": "llvm -mcpu=znver4 (2 cores)",
            "machine": {"cpu": "AMD EPYC", "cpu_flags": ["avx512f", "avx512_bf16"]},
            "runtime": {"tvm_threads": 2, "torch_threads": 2},
            "versions": {"tvm": "0.27", "torch": "2.14.1", "onnxruntime": "1.32.0",
                         "openvino": "2026.4.1"},
            "command": "python -m bench.runtimes", "date": "2026-12-07T05:00:00+00:00"}


def test_page_from_synthetic_records(tmp_path):
    fast = _record("alexnet", tuned=4.0, ort=5.0, ov=6.0)
    slow = _record("resnet-18", tuned=7.5, ort=5.0, ov=6.0)
    out = str(tmp_path / "runtimes")
    runtimes.write_page([fast, slow], out, {"command": "python -m bench.runtimes",
                                            "date": "2026-12-07"})
    text = open(out + ".md", encoding="utf-8").read()
    assert "| llvm-znver4 | alexnet | 128 | 4.00 (0.40x) | 10.0 (1.00x) |" in text
    assert "3.00 (0.30x, bf16)" in text  # the default precision, marked
    assert "OpenVINO default (lower precision)" in text
    # fastest f32 leaves bf16 out; the verdict says plainly where the tuned build loses
    assert "| TVM tuned | yes |" in text and "| ONNX Runtime | **no** |" in text
    assert "tuned 7.50 ms is 1.50x ONNX Runtime's 5.00 ms" in text
    assert "AMD EPYC (flags: avx512f,avx512_bf16)" in text
    assert "onnxruntime 1.32.0, openvino 2026.4.1" in text
    assert "2.0e-02" in text and "2 / 2 / 2 / 2 / 2 / 2" in text
    doc = json.load(open(out + ".json", encoding="utf-8"))
    assert [r["network"] for r in doc["records"]] == ["alexnet", "resnet-18"]
    slow["machine_load"] = {"foreign_share": 0.3, "loaded": True}  # timed under load: marked
    runtimes.write_page([fast, slow], out, {"command": "c", "date": "2026-12-07"})
    assert "| llvm-znver4 | resnet-18 * | 128 |" in open(out + ".md", encoding="utf-8").read()


def test_records_load_by_network_order(tmp_path):
    for rec in (_record("vgg-16", 1, 2, 3), _record("alexnet", 1, 2, 3)):
        path = runtimes.record_path(str(tmp_path), rec["platform"], rec["network"], 128)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        json.dump(rec, open(path, "w", encoding="utf-8"))
    assert [r["network"] for r in runtimes.load_records(str(tmp_path))] == ["alexnet",
                                                                            "vgg-16"]


def test_a_bf16_record_is_compared_with_openvino_bf16_and_left_out_of_f32(tmp_path):
    rec = _record("resnet-18", tuned=3.5, ort=5.0, ov=6.0)
    rec["tuned_precision"] = "bf16"
    rec["precision"].update(tvm_tuned="bf16", metatune_compile="bf16", metatune_load="bf16")
    assert runtimes.rivals_of(rec) == ("openvino_default",)
    assert runtimes.fastest_f32(rec) == "onnxruntime"  # the faster bf16 build is left out
    ok, says = runtimes.verdict(rec)
    assert ok is False and "1.17x OpenVINO default's 3.00 ms" in says
    rec["latency_windows_ms"] = {"tvm_tuned": [3.5, 2.8], "openvino_default": [3.0, 3.2]}
    ok, says = runtimes.verdict(rec)  # the verdict stays on the medians
    assert ok is False and "; fastest windows: tuned 2.80 ms, 0.93x OpenVINO default's" in says
    del rec["latency_windows_ms"]["openvino_default"]  # a rival without windows: no clause
    assert "fastest windows" not in runtimes.verdict(rec)[1]
    assert runtimes.record_path("r", "p", "resnet-18", 128, "bf16").endswith(
        "resnet-18-128-bf16.json")
    f32 = _record("resnet-18", tuned=4.0, ort=5.0, ov=6.0)
    out = str(tmp_path / "runtimes")
    runtimes.write_page([rec, f32], out, {"command": "c", "date": "2026-12-07"})
    text = open(out + ".md", encoding="utf-8").read()
    assert "| resnet-18 | 128 (bf16) | 3.50 (0.35x, bf16) |" in text
    for r in (rec, f32):  # records load f32 first, then bf16, per network
        path = runtimes.record_path(str(tmp_path), r["platform"], r["network"], 128,
                                    r.get("tuned_precision", "fp32"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        json.dump(r, open(path, "w", encoding="utf-8"))
    assert [r.get("tuned_precision", "fp32")
            for r in runtimes.load_records(str(tmp_path))] == ["fp32", "bf16"]


def test_tiny_convnet_side_by_side_through_ort_and_openvino(tmp_path):
    """Run in a fresh process: once OpenVINO and ONNX Runtime have made their thread pools, a
    SIGINT to the process (as the Ctrl-C tests send) crashes it, so they stay out of the
    suite's own process."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("openvino")
    import subprocess
    import sys

    code = ("import sys; from tests.test_bench_runtimes import check_side_by_side; "
            "check_side_by_side(sys.argv[1])")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def check_side_by_side(tmp: str) -> None:
    """PyTorch eager, ONNX Runtime and OpenVINO (f32, default precision) on a tiny conv net,
    timed side by side: outputs agree, every runtime's threads read back."""
    from tests.models import tiny_convnet
    from tuner.engine.networks import load_torch_network

    net = load_torch_network(tiny_convnet(), "tiny", (1, 8, 16, 16))  # as tune.py imports it
    x = net.example_input()
    names = ("torch", "onnxruntime", "openvino_f32", "openvino_default")
    failures: dict[str, str] = {}
    made = deploy_runtimes(net.torch_module, x, 2, tmp, names, failures)
    assert failures == {} and list(made) == list(names)
    rec = time_side_by_side(made, made["torch"].output, windows=2, min_window_ms=5, rounds=2)
    assert set(rec["latency_ms"]) == set(names)
    assert all(v > 0 for v in rec["latency_ms"].values())
    assert all(len(v) == 2 for v in rec["latency_windows_ms"].values())
    assert rec["threads"] == {n: 2 for n in names}  # read back from every runtime
    assert np.allclose(made["torch"].output, net.reference(x))
    for name in ("onnxruntime", "openvino_f32"):
        assert rec["rel_error"][name] < 1e-4 and rec["precision"][name] == "f32"
    assert rec["rel_error"]["openvino_default"] < 5e-2  # bf16 where the CPU has it
    assert rec["precision"]["openvino_default"] in ("f32", "bf16", "f16")
