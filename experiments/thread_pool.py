"""Issue 62: TVM's thread-pool settings, idle and with one core busy.

With ``TVM_NUM_THREADS`` set (as MetaTune sets it: one thread per core), TVM's CPU thread
pool pins each worker to a core (``TVM_BIND_THREADS``, default on) and lets it spin on its
queue before it sleeps (``TVM_THREAD_POOL_SPIN_COUNT``, default 300000); both are read
once per process. On the 2-core EPYC a busy process on one core made the tuned
shufflenet_v2_x0_5 about 200x slower (400 against 2 ms a call) and squeezenet 18x
(``experiments/slow_core.py``; ONNX Runtime 3.4x, OpenVINO 1.8x): the worker pinned to
the busy core gets a slice of it only now and then, and the network waits for it at
every parallel loop.

Each exported artifact (``export.py``'s directory, run with ``tvm.runtime`` alone) is
timed in fresh processes, one per (setting, condition, repeat), the settings' order
alternating from one repeat to the next, each process timing ``--windows`` windows of at
least 200 ms with TVM's time evaluator after one untimed call. A setting is
``default`` (TVM's) or comma-separated ``VAR=VALUE`` pairs. Conditions: the machine as
it is (``idle``) and with a busy loop pinned to the last CPU (``busy``). The page gives
each setting's median latency over the repeats and its ratio to TVM's default; a process
that does not finish in ``--timeout`` seconds counts as that long a window.

    nice -n -5 .venv/bin/python -m experiments.thread_pool --artifacts A1 A2 \\
        --out docs/lab/compile/thread-pool
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from bench.common import geomean, provenance, write_results
from experiments.slow_core import busy_core
from metatune.tvm_env import host_cpus, host_num_cores

#: The setting with TVM's own defaults (none of :data:`VARIABLES` set).
DEFAULT = "default"
#: The thread-pool variables a setting may set (each unset otherwise).
VARIABLES = ("TVM_BIND_THREADS", "TVM_THREAD_POOL_SPIN_COUNT")
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


def setting_env(setting: str) -> dict[str, str]:
    """The variables of a setting (``default``: none).

    Raises:
        SystemExit: A pair that is not ``VAR=VALUE`` of :data:`VARIABLES`.
    """
    if setting == DEFAULT:
        return {}
    env = {}
    for pair in setting.split(","):
        name, _, value = pair.partition("=")
        if name not in VARIABLES or not value:
            raise SystemExit(f"setting {setting!r}: give {DEFAULT!r} or VAR=VALUE pairs of "
                             f"{', '.join(VARIABLES)}")
        env[name] = value
    return env


def time_once(artifact: str, setting: str, busy_cpu: int | None, windows: int,
              threads: int, timeout: float) -> dict:
    """One fresh process timing ``artifact`` with ``setting``, a busy loop pinned to
    ``busy_cpu`` meanwhile unless it is ``None``."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(TVM_NUM_THREADS=str(threads), **setting_env(setting))
    try:
        with busy_core(busy_cpu):
            done = subprocess.run([sys.executable, "-c", _TIME, artifact, str(windows)],
                                  env=env, capture_output=True, text=True, check=True,
                                  timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"median_ms": timeout * 1e3, "threads": threads, "timed_out": True}
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {"median_ms": statistics.median(out["ms"]), "threads": out["threads"]}


def summarize(runs: list[dict], settings: list[str]) -> list[dict]:
    """Per artifact and condition: each setting's median over repeats and its ratio to
    :data:`DEFAULT`'s; then a geomean row per condition and setting."""
    rows = []
    keys = sorted({(r["artifact"], r["condition"]) for r in runs})
    for artifact, condition in keys:
        med = {s: statistics.median(r["median_ms"] for r in runs if r["artifact"] == artifact
                                    and r["condition"] == condition and r["setting"] == s)
               for s in settings}
        late = {s: any(r.get("timed_out") for r in runs if r["artifact"] == artifact
                       and r["condition"] == condition and r["setting"] == s)
                for s in settings}
        for s in settings:
            rows.append({"artifact": artifact, "condition": condition, "setting": s,
                         "median_ms": med[s], "ratio": med[s] / med[DEFAULT],
                         "timed_out": late[s], "baseline_timed_out": late[DEFAULT]})
    for condition in sorted({c for _, c in keys}):
        for s in settings:
            mine = [r for r in rows if r["condition"] == condition and r["setting"] == s
                    and r["artifact"] != "*"]
            rows.append({"artifact": "*", "condition": condition, "setting": s,
                         "median_ms": None, "ratio": geomean([r["ratio"] for r in mine]),
                         "timed_out": any(r["timed_out"] for r in mine),
                         "baseline_timed_out": any(r["baseline_timed_out"] for r in mine)})
    return rows


def ratio_cell(row: dict) -> str:
    """A ratio, as a bound where a timed-out process (counted as ``--timeout``) made it one:
    ``<`` when only the baseline timed out, ``>`` when only this setting did, ``-`` both."""
    if row.get("timed_out") and row.get("baseline_timed_out"):
        return "1.000" if row["setting"] == DEFAULT else "- (both timed out)"
    if row.get("baseline_timed_out"):
        return f"< {row['ratio']:.3g}"
    if row.get("timed_out"):
        return f"> {row['ratio']:.3g}"
    return f"{row['ratio']:.3f}"


def page(doc: dict) -> str:
    lines = [f"# {doc['title']}", "", f"- command: `{doc['command']}`",
             f"- date: {doc['date']}", f"- machine: {doc['machine']}", "",
             "Median latency (ms) over the repeats (each a fresh process: median of "
             f"{doc['windows']} windows); ratio to TVM's defaults. `*`: geomean "
             "over the artifacts. A process that did not finish in the time allowed is "
             "*timed out*: its latency is at least that long, and ratios with it are bounds.",
             "",
             "| artifact | condition | setting | median ms | / default |",
             "|---|---|---|---|---|"]
    for r in doc["summary"]:
        ms = ("-" if r["median_ms"] is None
              else f"timed out (> {r['median_ms'] / 1e3:.0f} s)" if r.get("timed_out")
              else f"{r['median_ms']:.3f}")
        lines.append(f"| {r['artifact']} | {r['condition']} | {r['setting']} | {ms} | "
                     f"{ratio_cell(r)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--artifacts", nargs="+", help="export.py directories (required to time)")
    p.add_argument("--settings", nargs="+",
                   default=[DEFAULT, "TVM_BIND_THREADS=0"])
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--windows", type=int, default=10)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per process")
    p.add_argument("--threads", type=int, default=host_num_cores())
    p.add_argument("--conditions", nargs="+", default=["idle", "busy"],
                   choices=["idle", "busy"])
    p.add_argument("--out", required=True, help="page and JSON path without extension")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite the page and summary from the runs in OUT.json; time nothing")
    args = p.parse_args()
    if args.report_only:
        with open(args.out + ".json", encoding="utf-8") as f:
            doc = json.load(f)
        settings = list(dict.fromkeys(r["setting"] for r in doc["runs"]))
        doc["summary"] = summarize(doc["runs"], settings)
        write_results(args.out + ".json", args.out + ".md", doc, page(doc))
        return
    if not args.artifacts:
        raise SystemExit("--artifacts: name the export.py directories to time")
    if DEFAULT not in args.settings:
        raise SystemExit(f"--settings must hold {DEFAULT!r}, the baseline")
    for setting in args.settings:
        setting_env(setting)

    busy_cpu = host_cpus()[-1]
    prov = provenance("experiments.thread_pool")
    runs = []
    for rep in range(args.repeats):
        order = args.settings if rep % 2 == 0 else args.settings[::-1]
        for artifact in args.artifacts:
            for condition in args.conditions:
                for setting in order:
                    got = time_once(artifact, setting, busy_cpu if condition == "busy" else None,
                                    args.windows, args.threads, args.timeout)
                    runs.append({"artifact": os.path.normpath(artifact), "condition": condition,
                                 "setting": setting, "repeat": rep, **got})
                    print(json.dumps(runs[-1]), flush=True)
    summary = summarize(runs, args.settings)
    doc = {"title": "TVM's thread-pool settings, idle and with one core busy",
           "command": prov["command"], "date": prov["date"], "machine": prov["machine"],
           "windows": args.windows, "runs": runs, "summary": summary}
    write_results(args.out + ".json", args.out + ".md", doc, page(doc))


if __name__ == "__main__":
    main()
