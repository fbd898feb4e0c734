"""Issue 62: where OpenVINO is faster than the tuned build, by kind of layer.

For a ``tune.py`` work dir: the network as ``bench.runtimes`` builds it (same weights),
exported to ONNX, compiled by OpenVINO's CPU plugin in f32 with ``PERF_COUNT`` on, run
``--runs`` times; each executed node's real time is summed by its type (``Convolution``,
``GroupConvolution`` for depthwise, ...) and by the kernel OpenVINO chose (``exec_type``,
e.g. ``jit_avx512_1x1``). Beside it, the tuned build's time in the network per TVM task,
from ``experiments.profile_network``'s JSON for the same work dir when one is given
(``--tvm-profile``), summed by the operators fused into the task.

    nice -n -5 .venv/bin/python -m experiments.openvino_layers \\
        --work-dir work/runtimes/mobilenet-v2-128
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import defaultdict


def openvino_layers(onnx_path: str, x, threads: int, runs: int) -> list[dict]:
    """Per executed node: ``name``, ``type``, ``exec_type`` and the mean ``ms`` a run."""
    import openvino as ov

    from bench.runtime_timers import openvino_config

    core = ov.Core()
    compiled = core.compile_model(core.read_model(onnx_path), "CPU",
                                  openvino_config(threads, "f32", PERF_COUNT=True))
    request = compiled.create_infer_request()
    for _ in range(5):
        request.infer({0: x})
    total: dict[tuple[str, str, str], float] = defaultdict(float)
    for _ in range(runs):
        request.infer({0: x})
        for info in request.get_profiling_info():
            if info.status == info.Status.EXECUTED:
                key = (info.node_name, info.node_type, info.exec_type)
                total[key] += info.real_time.total_seconds() * 1e3
    return [{"name": n, "type": t, "exec_type": e, "ms": ms / runs}
            for (n, t, e), ms in sorted(total.items(), key=lambda kv: -kv[1])]


def task_kind(task: str) -> str:
    """A TVM task's name without its numbers (``fused_conv2d12_add6_relu81`` ->
    ``fused_conv2d_add_relu``): the operators fused into it."""
    return "_".join(part.rstrip("0123456789") for part in task.split("_"))


def by(rows: list[dict], key: str) -> dict[str, float]:
    """Summed ``ms`` per value of ``key``, heaviest first."""
    out: dict[str, float] = defaultdict(float)
    for r in rows:
        out[r[key]] += r["ms"]
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", required=True)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--tvm-profile", help="experiments.profile_network's JSON for the work dir")
    args = p.parse_args()

    from bench.runtime_timers import export_onnx
    from bench.runtimes import tuned_build

    with open(os.path.join(args.work_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    net, _, threads = tuned_build(args.work_dir, report)
    x = net.example_input()
    onnx_path = export_onnx(net.torch_module, x, os.path.join(tempfile.mkdtemp(), "m.onnx"))
    rows = openvino_layers(onnx_path, x, threads, args.runs)
    print(f"OpenVINO f32, {threads} threads, {args.runs} runs: "
          f"{sum(r['ms'] for r in rows):.3f} ms of executed nodes a run")
    for title, key in (("by node type", "type"), ("by kernel", "exec_type")):
        print(f"\n{title}:")
        for name, ms in by(rows, key).items():
            print(f"  {ms:8.3f} ms  {name}")
    print("\nheaviest nodes:")
    for r in rows[:15]:
        print(f"  {r['ms']:8.3f} ms  {r['type']:18s} {r['exec_type']:24s} {r['name']}")
    if args.tvm_profile:
        with open(args.tvm_profile, encoding="utf-8") as f:
            prof = json.load(f)
        kinds: dict[str, float] = defaultdict(float)
        for t in prof["tasks"]:
            kinds[task_kind(t["task"])] += t["network_us"] / 1e3
        print(f"\nTVM tuned build in the network: {prof['latency_ms']:.3f} ms; per task "
              f"kind (from {args.tvm_profile}):")
        for name, ms in sorted(kinds.items(), key=lambda kv: -kv[1]):
            print(f"  {ms:8.3f} ms  {name}")


if __name__ == "__main__":
    main()
