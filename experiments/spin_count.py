"""Issue 62: TVM's thread pool spin count, idle and with one core busy.

TVM's CPU thread pool pins one worker per core and lets each worker spin on its queue
(``TVM_THREAD_POOL_SPIN_COUNT``, read once per process; TVM's default 300000) before it
sleeps. On the 2-core EPYC a busy process on one core made the tuned squeezenet 18x
slower (156 against 8.7 ms; ONNX Runtime 3.4x, OpenVINO 1.8x), and with the spin count
0 only 2x (``experiments/slow_core.py``): a spinning worker uses up its share of the core
and then waits a whole scheduler slice for its next job, a sleeping one is woken at once.

Each exported artifact (``export.py``'s directory, run with ``tvm.runtime`` alone) is
timed in fresh processes, one per (spin count, condition, repeat), the spin counts'
order alternating from one repeat to the next, each process timing 10 windows of at
least 200 ms with TVM's time evaluator after one untimed call. Conditions: the machine as
it is (``idle``) and with a busy loop pinned to the last CPU (``busy``). The page gives
each spin count's median latency over the repeats and its ratio to TVM's default.

    nice -n -5 .venv/bin/python -m experiments.spin_count --artifacts A1 A2 \\
        --out docs/lab/compile/spin-count
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from bench.common import geomean, provenance, write_results

#: The spin-count setting TVM uses when the variable is unset.
DEFAULT = "default"
_BUSY = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"
_TIME = """
import json, os, sys, tvm
path = sys.argv[1]
manifest = json.load(open(os.path.join(path, "manifest.json")))
dev = tvm.cpu()
vm = tvm.runtime.vm.VirtualMachine(tvm.runtime.load_module(
    os.path.join(path, manifest["library"])), dev)
spec = manifest["inputs"][0]
import numpy as np
x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal(spec["shape"]).astype(
    spec["dtype"]), dev)
vm["main"](x)
t = vm.time_evaluator("main", dev, number=1, repeat=int(sys.argv[2]), min_repeat_ms=200)
print(json.dumps({"ms": [r * 1e3 for r in t(x).results],
                  "threads": int(tvm.runtime.num_threads())}))
"""


def time_once(artifact: str, spin: str, busy_cpu: int | None, windows: int,
              threads: int) -> dict:
    """One fresh process timing ``artifact`` with ``spin`` (``default``: unset), a busy
    loop pinned to ``busy_cpu`` meanwhile unless it is ``None``."""
    env = {**os.environ, "TVM_NUM_THREADS": str(threads)}
    env.pop("TVM_THREAD_POOL_SPIN_COUNT", None)
    if spin != DEFAULT:
        env["TVM_THREAD_POOL_SPIN_COUNT"] = spin
    busy = (subprocess.Popen([sys.executable, "-c", _BUSY, str(busy_cpu)])
            if busy_cpu is not None else None)
    try:
        done = subprocess.run([sys.executable, "-c", _TIME, artifact, str(windows)], env=env,
                              capture_output=True, text=True, check=True)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {"median_ms": statistics.median(out["ms"]), "threads": out["threads"]}


def summarize(runs: list[dict], spins: list[str]) -> list[dict]:
    """Per artifact and condition: each spin count's median over repeats and its ratio to
    :data:`DEFAULT`'s; then a geomean row per condition and spin count."""
    rows = []
    keys = sorted({(r["artifact"], r["condition"]) for r in runs})
    for artifact, condition in keys:
        med = {s: statistics.median(r["median_ms"] for r in runs if r["artifact"] == artifact
                                    and r["condition"] == condition and r["spin"] == s)
               for s in spins}
        for s in spins:
            rows.append({"artifact": artifact, "condition": condition, "spin": s,
                         "median_ms": med[s], "ratio": med[s] / med[DEFAULT]})
    for condition in sorted({c for _, c in keys}):
        for s in spins:
            ratios = [r["ratio"] for r in rows
                      if r["condition"] == condition and r["spin"] == s and r["artifact"] != "*"]
            rows.append({"artifact": "*", "condition": condition, "spin": s,
                         "median_ms": None, "ratio": geomean(ratios)})
    return rows


def page(doc: dict) -> str:
    lines = [f"# {doc['title']}", "", f"- command: `{doc['command']}`",
             f"- date: {doc['date']}", f"- machine: {doc['machine']}", "",
             "Median latency (ms) over the repeats (each a fresh process: median of "
             f"{doc['windows']} windows); ratio to TVM's default spin count. `*`: geomean "
             "over the artifacts.", "",
             "| artifact | condition | spin count | median ms | / default |",
             "|---|---|---|---|---|"]
    for r in doc["summary"]:
        ms = "-" if r["median_ms"] is None else f"{r['median_ms']:.3f}"
        lines.append(f"| {r['artifact']} | {r['condition']} | {r['spin']} | {ms} | "
                     f"{r['ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--artifacts", nargs="+", required=True, help="export.py directories")
    p.add_argument("--spins", nargs="+", default=[DEFAULT, "0"])
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--windows", type=int, default=10)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--conditions", nargs="+", default=["idle", "busy"],
                   choices=["idle", "busy"])
    p.add_argument("--out", required=True, help="page and JSON path without extension")
    args = p.parse_args()
    if DEFAULT not in args.spins:
        raise SystemExit(f"--spins must hold {DEFAULT!r}, the baseline")

    busy_cpu = max(os.sched_getaffinity(0))
    prov = provenance("experiments.spin_count")
    runs = []
    for rep in range(args.repeats):
        order = args.spins if rep % 2 == 0 else args.spins[::-1]
        for artifact in args.artifacts:
            for condition in args.conditions:
                for spin in order:
                    got = time_once(artifact, spin, busy_cpu if condition == "busy" else None,
                                    args.windows, args.threads)
                    runs.append({"artifact": os.path.normpath(artifact), "condition": condition,
                                 "spin": spin, "repeat": rep, **got})
                    print(json.dumps(runs[-1]), flush=True)
    summary = summarize(runs, args.spins)
    doc = {"title": "TVM's thread-pool spin count, idle and with one core busy",
           "command": prov.get("command", "python -m experiments.spin_count"),
           "date": prov.get("date"), "machine": prov.get("machine"),
           "windows": args.windows, "runs": runs, "summary": summary}
    write_results(args.out + ".json", args.out + ".md", doc, page(doc))


if __name__ == "__main__":
    main()
