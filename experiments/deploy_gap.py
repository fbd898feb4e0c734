"""Issue 62: why mobilenet-v2 ran slower through ``metatune.load`` and the ``torch.compile``
backend than the tuned build ``bench.runtimes`` times in-process, and whether the fix holds.

Builds the work dir's network as ``bench.runtimes`` does (in memory), exports it to a
temporary directory as ``export.py`` does, compiles it with ``torch.compile(backend=
"metatune")``, and runs each call path on the same input, side by side in one process:

- ``tuned_te``: the in-memory build through TVM's time evaluator ("TVM tuned");
- ``so_te``: the exported ``model.so`` through the time evaluator (JIT vs shared library);
- ``load_aligned``: ``metatune.load`` on a 64-byte aligned ``torch.from_numpy`` tensor
  (TVM takes it through DLPack, no copy);
- ``load_unaligned``: the same on a tensor 16 bytes off (what ``torch.from_numpy`` of a
  ``malloc``-ed image usually is; copied by :func:`metatune.deploy._to_tvm`);
- ``load_torch_clone``: the copy as it was before the fix, ``x.clone()`` in torch;
- ``backend_unaligned``: ``torch.compile(backend="metatune")`` on the unaligned tensor;
- ``backend_aligned``: the same on the aligned one (the backend's own per-call cost);
- ``vm_main``: the VM's ``main`` called from Python on a TVM tensor made once (the FFI call
  alone, what every path above adds its wrapper to).

With ``--profile N`` it first profiles ``N`` calls of ``backend_aligned`` on the calling
thread's CPU clock (``cProfile`` with ``time.thread_time``: what the Python side of a call
costs, TorchDynamo's guards included) and prints the functions that took most.

For each it prints the CPU time each thread of the process spends per call
(``/proc/self/task/*/schedstat``: a thread that appears only in some paths is work those
paths add) and the wall time of interleaved windows (:func:`tuner.engine.timing.interleaved`).
On a loaded machine the wall times are only comparable within one run.

    nice -n 19 .venv/bin/python -m experiments.deploy_gap --work-dir work/runtimes/mobilenet-v2-128
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading


def thread_cpu_ns() -> dict[str, int]:
    """Native thread id -> CPU nanoseconds it has run."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as f:
                out[tid] = int(f.read().split()[0])
        except OSError:  # the thread ended
            pass
    return out


def cpu_per_call(call, n: int) -> dict[str, float]:
    """CPU ms per call of every thread busy over ``n`` calls (``main``: this thread)."""
    call()
    call()
    before = thread_cpu_ns()
    for _ in range(n):
        call()
    after = thread_cpu_ns()
    main = str(threading.get_native_id())
    busy = {("main" if t == main else t): (ns - before.get(t, 0)) / n / 1e6
            for t, ns in after.items()}
    return {t: round(ms, 2) for t, ms in busy.items() if ms >= 0.05}


def profile_calls(call, n: int, top: int = 15) -> None:
    """Print the functions that took most of the calling thread's CPU over ``n`` calls
    (``tottime``, microseconds per call), the call's total first."""
    import cProfile
    import pstats
    import time

    call()
    prof = cProfile.Profile(time.thread_time)
    prof.enable()
    for _ in range(n):
        call()
    prof.disable()
    stats = pstats.Stats(prof)
    print(f"\nbackend_aligned, this thread's CPU us per call ({n} calls): "
          f"{stats.total_tt / n * 1e6:.0f} in all")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    for (file, line, func), (_, ncalls, tottime, _, _) in rows:
        print(f"  {tottime / n * 1e6:8.1f}  x{ncalls / n:<6.0f} {func} "
              f"({os.path.basename(file)}:{line})")


def offset_input(x, offset: int):
    """``x`` copied into numpy memory whose data starts ``offset`` bytes past 64-byte
    alignment, as a ``torch.from_numpy`` tensor."""
    import numpy as np
    import torch

    raw = np.empty(x.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    array = raw[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    array[...] = x
    return torch.from_numpy(array)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--work-dir", required=True)
    p.add_argument("--calls", type=int, default=40, help="calls per CPU-time count")
    p.add_argument("--windows", type=int, default=6)
    p.add_argument("--min-window-ms", type=float, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", type=int, default=0,
                   help="profile this many backend calls first (0: no profile)")
    args = p.parse_args()

    import torch
    import tvm

    import metatune
    from bench.runtimes import tuned_build
    from metatune.deploy import _flatten
    from tuner.app.export import ExportConfig, run_export
    from tuner.engine.runtime import configure_tvm_threads, tvm_num_threads
    from tuner.engine.timing import interleaved, window_timer

    with open(os.path.join(args.work_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    net, compiled, threads = tuned_build(args.work_dir, report)
    x = net.example_input()
    path, _ = run_export(ExportConfig(work_dir=args.work_dir,
                                      out=os.path.join(tempfile.mkdtemp(), "net.metatune")))
    loaded = metatune.load(path)
    so_vm = tvm.runtime.vm.VirtualMachine(
        tvm.runtime.load_module(os.path.join(path, loaded.manifest["library"])), tvm.cpu())
    backend = torch.compile(net.torch_module, backend="metatune",
                            options={"work_dir": args.work_dir})
    aligned, unaligned = offset_input(x, 0), offset_input(x, 16)
    with torch.inference_mode():
        backend(unaligned)
    configure_tvm_threads(threads)
    print(f"TVM threads {tvm_num_threads()}, torch threads {torch.get_num_threads()}; "
          f"unaligned input is {unaligned.data_ptr() % 64} bytes off", flush=True)

    dev = tvm.cpu()
    inp = tvm.runtime.tensor(x, dev)
    main_fn = loaded.function.function

    def evaluator(vm, number: int):
        return vm.time_evaluator("main", dev, number=number, repeat=1)

    def te_windows(vm):
        def windows(count, min_ms):
            t = vm.time_evaluator("main", dev, number=1, repeat=count, min_repeat_ms=int(min_ms))
            return [r * 1e3 for r in t(inp).results]
        return windows

    def torch_call(fn, arg):
        def call():
            with torch.inference_mode():
                return fn(arg)
        return call

    calls = {
        "load_aligned": torch_call(loaded, aligned),
        "load_unaligned": torch_call(loaded, unaligned),
        "load_torch_clone": lambda: main_fn(tvm.runtime.from_dlpack(unaligned.clone())),
        "backend_unaligned": torch_call(backend, unaligned),
        "backend_aligned": torch_call(backend, aligned),
        "vm_main": lambda: main_fn(inp),
    }
    ref = compiled.run(x)
    for name, call in calls.items():
        out = _flatten(call())[0]
        out = (out if isinstance(out, torch.Tensor) else torch.from_dlpack(out)).numpy()
        print(f"{name}: max |output - tuned build's| = {abs(out - ref).max():.1e}")

    if args.profile:
        profile_calls(calls["backend_aligned"], args.profile)

    print(f"\nCPU ms per call, by thread ({args.calls} calls each, twice, interleaved):")
    tuned_eval, so_eval = evaluator(compiled.vm, args.calls), evaluator(so_vm, args.calls)
    for _ in range(2):
        print(f"  {'tuned_te':18s} {cpu_per_call(lambda: tuned_eval(inp), 1)} (per {args.calls})")
        print(f"  {'so_te':18s} {cpu_per_call(lambda: so_eval(inp), 1)} (per {args.calls})")
        for name, call in calls.items():
            print(f"  {name:18s} {cpu_per_call(call, args.calls)}", flush=True)

    timers = {"tuned_te": compiled.timer(x), "so_te": te_windows(so_vm),
              **{name: window_timer(call) for name, call in calls.items()}}
    res = interleaved(timers, args.windows, args.min_window_ms, args.rounds)
    print("\nwall ms per call, interleaved windows (median; windows):")
    for name, lat in res.items():
        print(f"  {name:18s} {lat.median_ms:7.3f}  " + " ".join(f"{v:.2f}" for v in lat.runs_ms))


if __name__ == "__main__":
    main()
