"""Issue 62: does a runtime loaded in the same process slow the tuned build down?

``bench.runtimes`` times the tuned build beside PyTorch eager, torch.compile, ONNX Runtime
and OpenVINO in one process. On the 2-core EPYC it timed squeezenet's 2048-trial build at
13.7 ms, while ``experiments.profile_network`` timed the same work dir's build at 8.77 ms
in a process holding nothing else. This script loads the work dir's tuned build, then adds
the other runtimes one at a time; after each, it times the tuned build alone (interleaved
windows, as ``bench.runtimes`` does) and counts the CPU every thread of the process spends
while the tuned build runs (``/proc/self/task/*/schedstat``, by thread name): a thread of
another runtime that runs while TVM does takes a core TVM's two threads need.

    nice -n -5 .venv/bin/python -m experiments.runtime_interference \\
        --work-dir work/runtimes/squeezenet-2048
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from experiments.deploy_gap import thread_cpu_ns


def thread_names() -> dict[str, str]:
    """Native thread id -> its name (``/proc/self/task/<tid>/comm``)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as f:
                out[tid] = f.read().strip()
        except OSError:
            pass
    return out


def cpu_while(call, n: int) -> dict[str, float]:
    """CPU ms per call of each thread busy while ``call`` runs ``n`` times, keyed by
    ``name/tid``; ``wall`` is the wall ms per call."""
    before, start = thread_cpu_ns(), time.perf_counter()
    for _ in range(n):
        call()
    wall, after = (time.perf_counter() - start) / n * 1e3, thread_cpu_ns()
    names = thread_names()
    busy = {f"{names.get(t, '?')}/{t}": (ns - before.get(t, 0)) / n / 1e6
            for t, ns in after.items()}
    return {"wall": round(wall, 3), **{t: round(ms, 3) for t, ms in busy.items() if ms >= 0.02}}


def affinities() -> dict[str, str]:
    """``name/tid`` -> the CPUs the thread may run on, for every thread of the process."""
    names, out = thread_names(), {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[f"{names.get(tid, '?')}/{tid}"] = str(sorted(os.sched_getaffinity(int(tid))))
        except OSError:
            pass
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", required=True)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--windows", type=int, default=10)
    p.add_argument("--min-window-ms", type=float, default=200)
    args = p.parse_args()

    from bench.runtime_timers import deploy_runtimes
    from bench.runtimes import tuned_build
    from tuner.engine.timing import interleaved

    with open(os.path.join(args.work_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    net, compiled, threads = tuned_build(args.work_dir, report)
    x = net.example_input()
    timer = compiled.timer(x)
    import tvm

    vm_main, inp = compiled.vm["main"], tvm.runtime.tensor(x, tvm.cpu())

    def step(label: str) -> None:
        time.sleep(0.2)  # interleaved's settle_s
        lat = interleaved({"tvm": timer}, args.windows, args.min_window_ms, 1)["tvm"]
        cpu = cpu_while(lambda: vm_main(inp), args.calls)
        print(f"{label:28s} tvm {lat.median_ms:7.3f} ms (windows "
              f"{min(lat.runs_ms):.2f}-{max(lat.runs_ms):.2f}); per call: {cpu}", flush=True)
        print(f"{'':28s} affinity: {affinities()}", flush=True)

    print(f"{report.get('network')}: {args.work_dir}, {threads} threads", flush=True)
    step("alone")
    onnx_dir = tempfile.mkdtemp()
    made = {}
    for name in ("torch", "torch_compile", "onnxruntime", "openvino_f32", "openvino_default"):
        made.update(deploy_runtimes(net.torch_module, x, threads, onnx_dir, (name,)))
        step(f"+ {name} (loaded)")
        made[name].timer(2, args.min_window_ms)
        step(f"  right after {name} ran")
    print("others' own latency:", {n: round(r.timer(3, args.min_window_ms)[1], 3)
                                   for n, r in made.items()}, flush=True)
    step("at the end")


if __name__ == "__main__":
    main()
