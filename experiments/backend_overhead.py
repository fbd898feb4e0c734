"""Issue 62: what a call through ``metatune.load``'s wrapper and the ``torch.compile``
backend costs beyond the VM itself, side by side in one process (prints, no page).

For a ``bench.runtimes`` work dir it builds the tuned network as that benchmark does and
times, in alternating rounds (:func:`tuner.engine.timing.interleaved`): ``evaluator`` (the
VM's time evaluator, "TVM tuned" on the runtimes page), ``raw`` (the VM's ``main`` called
from Python on a TVM tensor made once), ``VMFunction`` (``metatune.deploy``'s wrapper on a
``torch.from_numpy`` tensor, which may be unaligned and then copied), ``backend`` and
``backend_aligned`` (``torch.compile(backend="metatune")`` on that tensor and on a 64-byte
aligned copy).

    python -m experiments.backend_overhead --work-dir work/runtimes/mobilenet-v2-128

Measured 2026-12-07 18:35 UTC on the 2-core EPYC (quiet), mobilenet-v2 at 128 trials:
evaluator 7.11 ms, raw 7.14, VMFunction 7.90, backend 8.46, backend_aligned 8.22: Dynamo's
call path and the backend's per-call weight check (106 tensors) add about 1 ms a call.
"""

from __future__ import annotations

import argparse
import json
import os


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", required=True, help="a bench.runtimes work dir")
    p.add_argument("--windows", type=int, default=30)
    p.add_argument("--rounds", type=int, default=10)
    args = p.parse_args(argv)

    import numpy as np
    import torch
    import tvm

    import tuner  # noqa: F401 - registers the backend
    from bench.runtimes import tuned_build
    from metatune.deploy import VMFunction
    from tuner.engine.timing import interleaved, window_timer

    with open(os.path.join(args.work_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    network, compiled, _ = tuned_build(args.work_dir, report)
    xn = np.random.default_rng(0).standard_normal(network.input_shape).astype("float32")
    x = torch.from_numpy(xn)
    xa = torch.empty_like(x)
    xa.copy_(x)
    print(f"from_numpy input 64-byte aligned: {x.data_ptr() % 64 == 0}")
    backend = torch.compile(network.torch_module, backend="metatune",
                            options={"work_dir": args.work_dir})
    inp = tvm.runtime.tensor(xn, tvm.cpu(0))
    vm_main = compiled.vm["main"]
    wrapped = VMFunction(compiled.vm, "cpu")

    def under_inference(fn, value):
        def call():
            with torch.inference_mode():
                return fn(value)
        return call

    timers = {"evaluator": compiled.timer(xn), "raw": window_timer(lambda: vm_main(inp)),
              "VMFunction": window_timer(under_inference(wrapped, x)),
              "backend": window_timer(under_inference(backend, x)),
              "backend_aligned": window_timer(under_inference(backend, xa))}
    for name, lat in interleaved(timers, args.windows, 200, args.rounds).items():
        print(f"{name:16s} {lat.median_ms:.3f} ms")


if __name__ == "__main__":
    main()
