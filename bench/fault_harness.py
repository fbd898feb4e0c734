"""The harness of the fault rows (:mod:`bench.faults`, :mod:`bench.faults_round2`): real
``tune.py`` processes on a tiny conv net, and what is on disk after them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

from bench.common import REPO as ROOT
from tuner.engine.database import RECORD_FILE, WORKLOAD_FILE

BASE = ["--model", "tests.models:tiny_convnet", "--input-shape", "8,16,16", "--preset", "xgb",
        "--trials-per-round", "8", "evaluate.enabled=false", "progress=false",
        "search_params.population_size=32", "search_params.init_min_unmeasured=8",
        "runner.min_repeat_ms=10"]


@dataclass
class Run:
    """A finished tune.py process."""

    code: int
    stderr: str
    seconds: float

    @property
    def saw(self) -> str:
        """Exit code and the last stderr line (what the user reads)."""
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        last = lines[-1] if lines else ""
        tb = " (traceback)" if "Traceback" in self.stderr else ""
        return f"exit {self.code}{tb}: {last[:150]}"

    @property
    def one_line(self) -> bool:
        """An error the user reads on one line, no traceback."""
        return "Traceback" not in self.stderr and self.stderr.strip().splitlines()[-1:] != [] \
            and self.stderr.strip().splitlines()[-1].startswith(("error: ", "interrupted"))


def tune(work: str | None, *args: str, trials: int = 16, timeout: float = 600) -> Run:
    """Run tune.py to the end."""
    argv = [sys.executable, "tune.py", *BASE, "--trials", str(trials), *args]
    if work:
        argv += ["--work-dir", work]
    start = time.time()
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PYTHONPATH": ROOT})
    return Run(p.returncode, p.stderr, time.time() - start)


def start(work: str, *args: str, trials: int = 16) -> subprocess.Popen:
    """Start tune.py in its own process group (as a shell would for Ctrl-C)."""
    argv = [sys.executable, "tune.py", *BASE, "--trials", str(trials), "--work-dir", work,
            *args]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": ROOT})


def records(work: str) -> list[str]:
    """The record lines on disk."""
    path = os.path.join(work, RECORD_FILE)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [ln for ln in f.read().splitlines() if ln.strip()]


def loadable(work: str) -> int:
    """Records TVM loads from the work dir (after MetaTune's check), -1 if it cannot."""
    code = ("import sys; from tuner.engine.database import open_database; "
            "print(len(open_database(sys.argv[1]).get_all_tuning_records()))")
    p = subprocess.run([sys.executable, "-c", code, work], cwd=ROOT, capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": ROOT})
    return int(p.stdout.strip()) if p.returncode == 0 else -1


def repeats(work: str) -> int:
    """Candidates measured more than once (same workload line content and trace)."""
    wl_path = os.path.join(work, WORKLOAD_FILE)
    with open(wl_path, encoding="utf-8", errors="replace") as f:
        workloads = f.read().splitlines()
    keys = []
    for line in records(work):
        try:
            index, body = json.loads(line)
            keys.append(json.dumps([workloads[index], body[0]]))
        except (ValueError, IndexError, TypeError):
            continue
    return len(keys) - len(set(keys))


def wait_for(cond: Callable[[], bool], timeout: float = 180) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return False


class Tmpfs:
    """A small tmpfs mounted for one row (root only)."""

    def __init__(self, size: str) -> None:
        self.path = tempfile.mkdtemp(prefix="metatune-fault-fs-")
        self.process: subprocess.Popen | None = None  # killed on close if still running
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", self.path],
                       check=True, capture_output=True)

    def remount(self, opts: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{opts}", self.path], check=True,
                       capture_output=True)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        subprocess.run(["chattr", "-R", "-i", self.path], capture_output=True)
        if subprocess.run(["umount", self.path], capture_output=True).returncode:
            subprocess.run(["umount", "-l", self.path], capture_output=True)  # still in use
        os.rmdir(self.path)
