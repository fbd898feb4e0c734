"""The rows of issue 63 ("Reliability, second round") in :mod:`bench.faults`' table.

Each row starts real ``tune.py`` / ``train.py`` processes and returns what
:mod:`bench.faults`' rows return: (what the user saw, records before, records after,
passed). ``python -m bench.faults --only crafted-pickle train-out foreign-records bad-model
rpc-tracker``.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time

from bench.fault_harness import BASE, ROOT, Run, records, tune, wait_for
from metatune.records import measured_seconds
from tuner.engine.database import RECORD_FILE, WORKLOAD_FILE


class _Payload:
    """Unpickled, it would create ``marker``: a crafted pickle's payload."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _run(argv: list[str], tmp: str, timeout: float = 300) -> Run:
    """Run ``python <argv>`` in the repository (``tmp`` importable too)."""
    start = time.time()
    p = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "PYTHONPATH": f"{ROOT}:{tmp}"})
    return Run(p.returncode, p.stderr, time.time() - start)


def _errors(run: Run) -> list[str]:
    """The stderr lines that are not log lines (what the user reads as the error)."""
    return [ln for ln in run.stderr.splitlines()
            if ln.strip() and not (" INFO " in ln or " WARNING " in ln)]


def row_crafted_pickle(tmp: str):
    """A checkpoint whose unpickling would run a command, passed to train.py and tune.py."""
    import torch

    marker = os.path.join(tmp, "payload-ran")
    evil = os.path.join(tmp, "evil.ckpt")
    torch.save({"hyper_parameters": {}, "state_dict": {}, "x": _Payload(marker)}, evil)
    legacy = os.path.join(tmp, "evil-legacy.ckpt")
    with open(legacy, "wb") as f:
        pickle.dump({"x": _Payload(marker)}, f)
    runs = [_run(["train.py", f"pretrained={path}", f"out={tmp}/never.ckpt"], tmp)
            for path in (evil, legacy)]
    runs += [_run(["tune.py", "--network", "alexnet", "--preset", "meta-BO", "--checkpoint",
                   path, "--work-dir", f"{tmp}/never"], tmp) for path in (evil, legacy)]
    lines = [_errors(r) for r in runs]
    passed = (not os.path.exists(marker) and all(r.code == 2 for r in runs)
              and all(len(ln) == 1 and "weights_only" not in ln[0] for ln in lines)
              and not os.path.exists(f"{tmp}/never"))
    return (f"payload ran: {os.path.exists(marker)}; {runs[2].saw}", "-", "-", passed)


def row_train_out(tmp: str):
    """train.py's default output is the user's (runs/train), and an existing out is kept."""
    out = os.path.join(tmp, "mine.ckpt")
    with open(out, "w") as f:
        f.write("keep me")
    r = _run(["train.py", f"out={out}", "pretrain.epochs=0", "meta.steps=0"], tmp)
    with open(out) as f:
        kept = f.read() == "keep me"
    code = ("from lightning_modules.config import load_train_config; "
            "print(load_train_config().out)")
    default = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": ROOT}).stdout.strip()
    passed = (r.code == 2 and len(_errors(r)) == 1 and "overwrite=true" in r.stderr and kept
              and default.startswith(os.path.join(ROOT, "runs", "train") + os.sep))
    return (f"{r.saw}; default out {os.path.relpath(default, ROOT)}", "-", "-", passed)


def row_foreign_records(tmp: str):
    """A database measured for another CPU copied into a new work dir, tuned for haswell."""
    work = os.path.join(tmp, "foreign")
    os.makedirs(work)
    target = {"keys": ["cpu"], "kind": "llvm", "mcpu": "znver4", "num-cores": 2, "tag": ""}
    with open(os.path.join(work, WORKLOAD_FILE), "w") as f:
        f.write('["1", "AAAA"]\n')
    with open(os.path.join(work, RECORD_FILE), "w") as f:
        f.writelines(json.dumps([0, [[[], []], [1e-3], target, []]]) + "\n" for _ in range(24))
    before = sorted(os.listdir(work))
    r = tune(work, "--target", '{"kind": "llvm", "mcpu": "haswell"}', trials=32)
    passed = (r.code == 2 and r.one_line and "znver4" in r.stderr
              and sorted(os.listdir(work)) == before and len(records(work)) == 24)
    return r.saw, "24 (znver4)", f"{len(records(work))}, no settings.json", passed


def row_bad_model(tmp: str):
    """A bad model found only when it is imported: no work dir, one line each."""
    from tests.test_networks import _celu_onnx

    with open(os.path.join(tmp, "broken_syntax.py"), "w") as f:
        f.write("def model(:\n")
    with open(os.path.join(tmp, "truncated.onnx"), "wb") as f:
        f.write(b"\x08\x07\x12\x07pytorch\x1a")
    _celu_onnx(os.path.join(tmp, "celu.onnx"))
    cases = {"truncated ONNX": ["--onnx", f"{tmp}/truncated.onnx"],
             "ONNX op TVM lacks": ["--onnx", f"{tmp}/celu.onnx"],
             "--model returns an int": ["--model", "tests.models:not_a_module"],
             "--model with a syntax error": ["--model", "broken_syntax:model"]}
    bad = []
    for i, (name, args) in enumerate(cases.items()):
        work = os.path.join(tmp, f"model{i}")
        r = _run(["tune.py", *args, "--input-shape", "8,16,16", "--preset", "xgb",
                  "--work-dir", work], tmp)
        if r.code != 2 or len(_errors(r)) != 1 or not r.one_line or os.path.exists(work):
            bad.append(name)
    return (f"{len(cases) - len(bad)}/{len(cases)} one line, no work dir"
            + (f"; failed: {', '.join(bad)}" if bad else ""), "-", "-", not bad)


def row_rpc_tracker(tmp: str):
    """The RPC tracker killed after the first round of a 64-trial run on two servers."""
    from bench.rpc_farm import local_farm, stop_process

    work = os.path.join(tmp, "rpc")
    with local_farm(2, key="metatune-faults", threads=1) as farm:
        rpc = farm.rpc
        killed: list[float] = []

        def kill() -> None:
            if wait_for(lambda: len(records(work)) >= 8, timeout=300):
                stop_process(farm.tracker)
                killed.append(time.time())

        killer = threading.Thread(target=kill, daemon=True)
        killer.start()
        r = _run(["tune.py", *BASE, f"runner.rpc.key={rpc.key}",  # BASE ends in overrides
                  f"runner.rpc.tracker_port={rpc.tracker_port}", "runner.rpc.servers=2",
                  "--trials", "64", "--work-dir", work, "--runner", "rpc"], tmp, timeout=600)
        ended = time.time()
    took = ended - killed[0] if killed else float("nan")
    lines = records(work)
    failed = sum(measured_seconds(json.loads(ln)[1][1]) is None for ln in lines)
    passed = (r.code == 2 and r.one_line and "tracker" in r.stderr and took < 30
              and failed == 0 and "retry" not in r.stderr)
    return (f"{r.saw} ({took:.0f} s after the kill)", "8+ at the kill",
            f"{len(lines)}, {failed} recorded as failed", passed)


ROWS = {
    "crafted-pickle": ("12", row_crafted_pickle),
    "train-out": ("13", row_train_out),
    "foreign-records": ("14", row_foreign_records),
    "bad-model": ("15", row_bad_model),
    "rpc-tracker": ("16", row_rpc_tracker),
}  # titled in bench.faults.ROWS
