"""Issue 62: how each runtime copes when one of its cores runs slow.

On the 2-core EPYC VM the host's other tenants slow each virtual CPU by up to 1.8x for
seconds at a time (a pure-Python loop pinned to one CPU took 55-100 ms from one second to
the next, the machine otherwise idle), and the tuned build's latency swung 8.9-12.6 ms
with it. A runtime that splits each parallel loop evenly between its threads waits for
the slower core at every join; one that balances work dynamically does not. This script
times the work dir's tuned build beside ONNX Runtime and OpenVINO (f32), side by side in
alternating rounds as ``bench.runtimes`` does, first as the machine is, then with a
busy loop pinned to the last CPU (a second process at the same priority: that core runs
about half speed for the runtimes), alternating the two conditions ``--repeats`` times.

    nice -n -5 .venv/bin/python -m experiments.slow_core --work-dir work/runtimes/squeezenet-2048
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from metatune.tvm_env import host_cpus

_BUSY = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


@contextmanager
def busy_core(cpu: int | None) -> Iterator[None]:
    """Run the block with a busy loop (a second process, this one's priority) pinned to
    ``cpu``; ``None``: without one."""
    busy = subprocess.Popen([sys.executable, "-c", _BUSY, str(cpu)]) if cpu is not None else None
    try:
        yield
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", required=True)
    p.add_argument("--windows", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-window-ms", type=float, default=200)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()

    from bench.runtime_timers import deploy_runtimes
    from bench.runtimes import tuned_build
    from tuner.engine.timing import interleaved

    with open(os.path.join(args.work_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    net, compiled, threads = tuned_build(args.work_dir, report)
    x = net.example_input()
    others = deploy_runtimes(net.torch_module, x, threads, tempfile.mkdtemp(),
                             ("onnxruntime", "openvino_f32"))
    timers = {"tvm": compiled.timer(x), **{n: r.timer for n, r in others.items()}}
    busy_cpu = host_cpus()[-1]
    print(f"{report.get('network')}: {args.work_dir}, {threads} threads each; busy loop on "
          f"CPU {busy_cpu}", flush=True)
    for rep in range(args.repeats):
        for slow in (False, True):
            with busy_core(busy_cpu if slow else None):
                lat = interleaved(timers, args.windows, args.min_window_ms, args.rounds)
            ms = {n: round(v.median_ms, 3) for n, v in lat.items()}
            best = min(ms[n] for n in others)
            print(f"repeat {rep} {'one core busy' if slow else 'as it is   '}: {ms}; "
                  f"tvm / faster of the others {ms['tvm'] / best:.3f}", flush=True)


if __name__ == "__main__":
    main()
