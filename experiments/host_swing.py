"""How much this machine's CPU capacity swings when nothing else of ours runs on it.

A shared VM's virtual CPUs run as fast as the host lets them. Two probes, each run while
the machine is otherwise idle:

- ``--probe cores``: a pure-Python loop (2M additions) pinned to each CPU in turn, every
  2 s: how fast each core is from one second to the next;
- ``--probe network --work-dir W``: the work dir's tuned build (``bench.runtimes``'s
  ``tuned_build``) beside that loop on one thread, in alternating windows
  (:func:`tuner.engine.timing.interleaved`), every 5 s: how a TVM build on every core
  follows the swings.

    nice -n -5 .venv/bin/python -m experiments.host_swing --probe cores
    nice -n -5 .venv/bin/python -m experiments.host_swing --probe network \\
        --work-dir work/runtimes/squeezenet-2048
"""

from __future__ import annotations

import argparse
import json
import os
import time


def spin(n: int = 2_000_000) -> int:
    """A pure-Python loop: the core's speed, no memory traffic."""
    s = 0
    for i in range(n):
        s += i
    return s


def probe_cores(samples: int) -> None:
    """Time :func:`spin` pinned to each CPU in turn, ``samples`` times."""
    cpus = sorted(os.sched_getaffinity(0))
    for _ in range(samples):
        out = []
        for c in cpus:
            os.sched_setaffinity(0, {c})
            start = time.perf_counter()
            spin()
            out.append(f"cpu{c} {(time.perf_counter() - start) * 1e3:.1f} ms")
        os.sched_setaffinity(0, set(cpus))
        print(time.strftime("%H:%M:%S"), ", ".join(out), flush=True)
        time.sleep(2)


def probe_network(work_dir: str, samples: int) -> None:
    """Time the work dir's tuned build beside :func:`spin` (200k additions), ``samples``
    times."""
    from bench.runtimes import tuned_build
    from tuner.engine.timing import interleaved, window_timer

    with open(os.path.join(work_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    net, compiled, _ = tuned_build(work_dir, report)
    timers = {"tvm": compiled.timer(net.example_input()),
              "loop": window_timer(lambda: spin(200_000))}
    for _ in range(samples):
        lat = interleaved(timers, 4, 200, 2)
        print(time.strftime("%H:%M:%S"), f"tvm {lat['tvm'].median_ms:.3f} ms, 1-thread loop "
              f"{lat['loop'].median_ms:.3f} ms", flush=True)
        time.sleep(5)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--probe", choices=["cores", "network"], required=True)
    p.add_argument("--work-dir", help="a tune.py work dir (--probe network)")
    p.add_argument("--samples", type=int, default=8)
    args = p.parse_args()
    if args.probe == "cores":
        probe_cores(args.samples)
    elif not args.work_dir:
        raise SystemExit("--probe network needs --work-dir")
    else:
        probe_network(args.work_dir, args.samples)


if __name__ == "__main__":
    main()
