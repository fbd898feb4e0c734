"""Fault injection: run tune.py into every fault of issue 16 and print what the user saw.

Each row starts real ``tune.py`` processes on a tiny conv net (``tests.models:tiny_convnet``,
xgb preset, evaluation off) and injects one fault: a full disk (a small tmpfs), a second
run on the same work dir, torn / blank / malformed database lines, Ctrl-C in the middle of
a round, a work dir that turns read-only, bad input. It prints a Markdown table: fault,
what the user saw (exit code and the last stderr line), records before and after, verdict.
A row passes when the user got one line saying what to do, no record on disk was lost, no
candidate was measured twice, and (where it applies) rerunning resumed within the budget.

Needs root for the tmpfs rows (``mount``); they are skipped otherwise.

    python -m bench.faults                 # every row (about 20 minutes on 2 cores)
    python -m bench.faults --only lock ctrl-c
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable

from bench import faults_round2
from bench.fault_harness import ROOT, Run, Tmpfs, loadable, records, repeats, start, tune, wait_for
from tuner.engine.database import RECORD_FILE, WORKLOAD_FILE

# --- rows: each returns (what the user saw, records before, records after, passed) ---


def row_disk_full(tmp: str):
    fs = Tmpfs("320k")
    try:
        work = os.path.join(fs.path, "w")
        r = tune(work, trials=96)
        on_disk, ok_load = len(records(work)), loadable(work)
        fs.remount("size=8m")
        again = tune(work, trials=96)
        after = len(records(work))
        passed = (r.code == 2 and r.one_line and "MiB free" in r.stderr and ok_load == on_disk
                  and again.code == 0 and on_disk < after <= 96 and repeats(work) == 0)
        return (f"{r.saw} | rerun with space: exit {again.code}", f"0 (stopped at {on_disk}, "
                f"all {ok_load} loadable)", f"{after} after the rerun", passed)
    finally:
        fs.close()


def row_lock(tmp: str):
    work = os.path.join(tmp, "lock")
    first = start(work, trials=32)
    wait_for(lambda: os.path.exists(os.path.join(work, ".lock"))
             and open(os.path.join(work, ".lock")).read().strip() == str(first.pid))
    second = tune(work, trials=32)
    first.wait(timeout=600)
    n = len(records(work))
    passed = (second.code == 2 and second.one_line and f"process {first.pid}" in second.stderr
              and first.returncode == 0 and 0 < n <= 32 and repeats(work) == 0)
    return second.saw, "0", f"{n} (budget 32, {repeats(work)} repeats)", passed


def _finished(tmp: str, name: str, trials: int = 16) -> str:
    work = os.path.join(tmp, name)
    run = tune(work, trials=trials)
    assert run.code == 0, run.stderr[-2000:]
    return work


def _corrupt_then_repair(tmp: str, name: str, corrupt: Callable[[str], None], expect: int):
    work = _finished(tmp, name)
    before = len(records(work))
    corrupt(work)
    first = tune(work)
    repaired = tune(work, "--repair-db")
    after = loadable(work)
    passed = (first.code == 2 and first.one_line and "--repair-db" in first.stderr
              and repaired.code == 0 and after == expect)
    return (f"{first.saw} → with --repair-db: exit {repaired.code}", str(before), str(after),
            passed)


def row_torn_workload(tmp: str):
    def corrupt(work):
        with open(os.path.join(work, WORKLOAD_FILE), "a") as f:
            f.write('["1234", "2SsAAAAAAAB7CiAgInJvb3Rf')
    return _corrupt_then_repair(tmp, "torn-wl", corrupt, 16)


def row_malformed(tmp: str):
    def corrupt(work):
        path = os.path.join(work, RECORD_FILE)
        lines = records(work)
        stray = json.dumps([5, json.loads(lines[0])[1]])  # no workload line 5
        with open(path, "a") as f:
            f.write(stray + "\n[0]\n")
        with open(os.path.join(work, WORKLOAD_FILE), "a") as f:
            f.write("[0]\n")
    return _corrupt_then_repair(tmp, "malformed", corrupt, 16)


def row_blank_line(tmp: str):
    def corrupt(work):
        lines = records(work)
        with open(os.path.join(work, RECORD_FILE), "w") as f:
            f.write("\n".join(lines[:5] + [""] + lines[5:]) + "\n")
    return _corrupt_then_repair(tmp, "blank", corrupt, 16)


def row_budget(tmp: str):
    """A budget that is not a multiple of the round, on a net of more tasks than rounds."""
    work = os.path.join(tmp, "budget")
    r = tune(work, "--model", "tests.models:tiny_classifier", "--input-shape", "4,8,8",
             trials=20)
    n = len(records(work))
    return (f"exit {r.code}, measured {n} (conv, pool and dense tasks)", "0",
            f"{n} (budget 20, {repeats(work)} repeats)", n == 20 and repeats(work) == 0)


def row_ctrl_c(tmp: str):
    work = os.path.join(tmp, "ctrlc")
    p = start(work, trials=64)
    wait_for(lambda: len(records(work)) >= 8, timeout=300)
    time.sleep(1.0)  # the next round's search and builds are under way
    before = len(records(work))
    sent = time.time()
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
    took = time.time() - sent
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-g", str(p.pid)], capture_output=True, text=True).stdout
    r = Run(p.returncode, err, took)
    on_disk, ok_load = len(records(work)), loadable(work)
    again = tune(work, trials=64)
    after = len(records(work))
    passed = (r.code == 130 and "interrupted; rerun to resume" in err and "Traceback" not in err
              and took < 10 and not left.strip() and ok_load == on_disk >= before
              and again.code == 0 and on_disk < after <= 64 and repeats(work) == 0)
    return (f"{r.saw} after {took:.1f} s, {len(left.split())} processes left",
            f"{on_disk} at the interrupt", f"{after} after the rerun (budget 64)", passed)


def row_read_only(tmp: str):
    fs = Tmpfs("16m")
    try:
        work = os.path.join(fs.path, "w")
        p = start(work, trials=64)
        fs.process = p
        wait_for(lambda: len(records(work)) >= 8, timeout=300)
        files = [os.path.join(work, n) for n in os.listdir(work)
                 if os.path.isfile(os.path.join(work, n))]
        # immutable: even root cannot write (a remount would be refused: files are open)
        subprocess.run(["chattr", "+i", *files, work], check=True, capture_output=True)
        _, err = p.communicate(timeout=300)
        r = Run(p.returncode, err, 0)
        on_disk = len(records(work))
        subprocess.run(["chattr", "-i", *files, work], check=True, capture_output=True)
        again = tune(work, trials=64)
        after = len(records(work))
        passed = (r.code == 2 and r.one_line and again.code == 0 and on_disk <= after <= 64
                  and repeats(work) == 0)
        return r.saw, f"{on_disk} when it turned read-only", f"{after} after the rerun", passed
    finally:
        fs.close()


def row_one_line(tmp: str):
    bad_yaml = os.path.join(tmp, "bad.yaml")
    with open(bad_yaml, "w") as f:
        f.write("trials: [1\n")
    list_yaml = os.path.join(tmp, "list.yaml")
    with open(list_yaml, "w") as f:
        f.write("- 1\n")
    cases = [["--config", "/nonexistent.yaml"], ["--config", bad_yaml],
             ["--config", list_yaml], ["--config", tmp], ["--model", "torch.nn:Conv2d"],
             ["--model", "math:pi"], ["--model", "tests.models:raises"],
             ["--input-shape", "3,a"], ["--seed", "-1"]]
    bad = []
    for i, case in enumerate(cases):
        argv = [sys.executable, "tune.py", "--work-dir", os.path.join(tmp, f"one{i}"), *case]
        if "--model" not in case:
            argv[2:2] = ["--network", "alexnet"]
        p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": ROOT})
        if p.returncode != 2 or not Run(2, p.stderr, 0).one_line:
            bad.append(" ".join(case))
    c = subprocess.run([sys.executable, "collect.py", "run", "train_samples=abc"], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
    if c.returncode != 2 or not Run(2, c.stderr, 0).one_line:
        bad.append("collect.py run train_samples=abc")
    saw = (f"{len(cases) + 1 - len(bad)}/{len(cases) + 1} one line"
           + (f"; traceback: {', '.join(bad)}" if bad else ""))
    return saw, "-", "-", not bad


def row_minor(tmp: str):
    notes, ok = [], True
    work = os.path.join(tmp, "minor")
    p = start(work, trials=64)
    wait_for(lambda: len(records(work)) >= 8, timeout=300)
    stale = [d for d in os.listdir(tempfile.gettempdir())
             if d.startswith(f"metatune-build-{p.pid}-")]
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    again = tune(work, trials=24)
    gone = not any(os.path.exists(os.path.join(tempfile.gettempdir(), d)) for d in stale)
    ok &= bool(stale) and gone and again.code == 0
    notes.append(f"kill -9 build dir {'removed' if gone else 'LEFT'} on the next start")
    r = tune(os.path.join(tmp, "mcpu"), "--target", '{"kind": "llvm", "mcpu": "nonsense"}')
    ok &= r.code == 2 and "mcpu" in r.stderr
    notes.append(f"mcpu=nonsense: exit {r.code}")
    r = tune(os.path.join(tmp, "ckpt"), "--preset", "meta-BO-T", "--checkpoint", "/no.ckpt")
    ok &= r.code == 2 and r.seconds < 60 and not os.path.exists(os.path.join(tmp, "ckpt"))
    notes.append(f"bad --checkpoint: exit {r.code} in {r.seconds:.0f} s, no work dir")
    net = subprocess.run([sys.executable, "tune.py", "--network", "lenet", "--work-dir",
                          os.path.join(tmp, "lenet")], cwd=ROOT, capture_output=True, text=True)
    ok &= net.returncode == 2 and not os.path.exists(os.path.join(tmp, "lenet"))
    notes.append("unknown network: no work dir")
    with open(os.path.join(work, WORKLOAD_FILE), "a") as f:
        f.write("[0]")
    tune(work, "--repair-db", trials=24)
    with open(os.path.join(work, WORKLOAD_FILE + ".corrupt")) as f:
        ends = f.read().endswith("\n")
    ok &= ends
    notes.append(".corrupt lines end with a newline" if ends else ".corrupt: no newline")
    return "; ".join(notes), "-", f"{len(records(work))} (budget 24)", ok


def row_preset_trap(tmp: str):
    work = _finished(tmp, "preset")
    before = len(records(work))
    r = tune(work, "--preset", "meta-BO")
    passed = r.code == 2 and r.one_line and "--work-dir" in r.stderr
    return r.saw, str(before), str(len(records(work))), passed


def row_network_and_onnx(tmp: str):
    p = subprocess.run([sys.executable, "tune.py", "--network", "alexnet", "--onnx", "m.onnx"],
                       cwd=ROOT, capture_output=True, text=True)
    r = Run(p.returncode, p.stderr, 0)
    return r.saw, "-", "-", r.code == 2 and r.one_line


ROWS = {
    "disk-full": ("1. disk full (320 KB tmpfs, budget 96, then more space)", row_disk_full),
    "lock": ("2. two runs on one work dir", row_lock),
    "torn-workload": ("3. torn last line of database_workload.json", row_torn_workload),
    "malformed": ("3. `[0]` lines, a record of a workload that does not exist",
                  row_malformed),
    "blank-line": ("4. blank line in database_tuning_record.json", row_blank_line),
    "budget": ("5. --trials 20, 8 per round, a net of several tasks", row_budget),
    "ctrl-c": ("6. Ctrl-C in the middle of a round", row_ctrl_c),
    "read-only": ("7. work dir made unwritable mid-run (chattr +i)", row_read_only),
    "one-line": ("8. bad --config / --model / --input-shape / --seed, collect.py",
                 row_one_line),
    "minor": ("9. stale build dir, unknown mcpu, bad checkpoint, unknown network, .corrupt",
              row_minor),
    "preset-trap": ("10. resume a work dir with another preset", row_preset_trap),
    "network-onnx": ("11. --network with --onnx", row_network_and_onnx),
}


ROWS.update({key: (title, faults_round2.ROWS[key][1]) for key, title in (
    ("crafted-pickle", "12. a crafted pickle as pretrained= / --checkpoint (zip and legacy)"),
    ("train-out", "13. train.py onto an existing out; its default out"),
    ("foreign-records", "14. a znver4 database in a new work dir, tuned for haswell"),
    ("bad-model", "15. truncated ONNX, ONNX op TVM lacks, --model returning int, syntax error"),
    ("rpc-tracker", "16. RPC tracker killed mid-run (2 servers, 64 trials)"))})


TABLE_HEAD = ("| fault | what the user saw | records before | records after | verdict |",
              "|---|---|---|---|---|")


def table_line(title: str, saw: str, before, after, passed: bool, seconds: float) -> str:
    """One row of the printed table (``saw`` on one line, its ``|`` escaped)."""
    saw = saw.replace("|", "\\|").replace("\n", " ")
    return (f"| {title} | {saw} | {before} | {after} | "
            f"{'pass' if passed else 'FAIL'} ({seconds:.0f} s) |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="*", choices=list(ROWS), help="rows to run (default: all)")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="metatune-faults-")
    print("\n".join(TABLE_HEAD))
    failed = 0
    try:
        for key in args.only or list(ROWS):
            title, fn = ROWS[key]
            start_t = time.time()
            try:
                saw, before, after, passed = fn(tmp)
            except Exception as err:  # noqa: BLE001 - a row that crashes is a failed row
                saw, before, after, passed = f"row crashed: {err!r}"[:200], "?", "?", False
            failed += not passed
            print(table_line(title, saw, before, after, passed, time.time() - start_t),
                  flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
