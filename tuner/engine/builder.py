"""A MetaSchedule builder whose worker processes live for the whole tuning session.

``ms.builder.LocalBuilder`` starts a fresh process pool on every ``build`` call (every
round). Each fresh worker imports TVM and its tensor intrinsics inside its first,
time-limited job; on this machine that import alone took 29 s of the 30 s budget and
builds failed in cascades. Here the pool is created once, its workers run
:func:`tuner.engine.intrinsics.worker_initializer` (no timeout) before their first job, and a
worker killed by a timeout is restarted the same way. Workers are recycled after
``max_uses`` builds to bound memory growth (the reason LocalBuilder restarts its pool).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
import time

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

from tuner.engine.intrinsics import worker_initializer

logger = logging.getLogger(__name__)

#: Prefix of the builder's artifact directories: ``metatune-build-<pid>-<random>``.
BUILD_DIR_PREFIX = "metatune-build-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_build_dirs(root: str | None = None, max_age_s: float = 6 * 3600) -> int:
    """Remove artifact directories left by builders whose process is gone (a crash or kill).

    Directories named with a pid are removed when that process no longer runs; older ones
    without a pid when untouched for ``max_age_s`` seconds.

    Args:
        root: Where to look (the temporary directory by default).
        max_age_s: Age after which a directory without a pid counts as stale.

    Returns:
        The number of directories removed.
    """
    root = root or tempfile.gettempdir()
    removed = 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(BUILD_DIR_PREFIX):
            continue
        path = os.path.join(root, name)
        pid_text = name[len(BUILD_DIR_PREFIX):].split("-")[0]
        try:
            if pid_text.isdigit():
                stale = int(pid_text) != os.getpid() and not _pid_alive(int(pid_text))
            else:
                stale = time.time() - os.path.getmtime(path) > max_age_s
        except OSError:
            continue
        if stale and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def stop_pool(pool: PopenPoolExecutor, grace_s: float = 5.0) -> None:
    """Stop a TVM ``PopenPoolExecutor`` at once, also in the middle of a batch (Ctrl-C).

    ``PopenPoolExecutor.shutdown`` races with its own threads (a worker killed while its
    thread handles the death raises ``'NoneType' object has no attribute 'kill'``) and
    lets queued jobs start fresh workers. Here queued jobs are cancelled first, then every
    worker process (and its children) is killed, so threads blocked on a worker's pipe
    return; no thread is waited on for more than ``grace_s`` seconds.

    Args:
        pool: The pool.
        grace_s: How long to wait for its threads to finish.
    """
    from tvm.support.popen_pool import kill_child_processes

    pool._shutdown = True  # its __del__ must not shut it down again
    pool._threadpool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + grace_s
    while True:
        for worker in list(pool._worker_map.values()):
            proc = worker._proc
            if proc is not None and proc.poll() is None:
                try:
                    kill_child_processes(proc.pid)
                except Exception:  # noqa: BLE001 - best effort (psutil may be missing)
                    pass
                try:
                    proc.kill()
                except OSError:
                    pass
        threads = list(getattr(pool._threadpool, "_threads", ()))
        if not any(t.is_alive() for t in threads) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for worker in list(pool._worker_map.values()):
        proc = worker._proc
        if proc is not None:
            try:
                proc.wait(timeout=1.0)
            except Exception:  # noqa: BLE001 - already killed; never block shutdown
                pass


def initialized_pool(max_workers: int, timeout_sec: float, target_kinds: tuple[str, ...],
                     max_uses: int = 256) -> PopenPoolExecutor:
    """A TVM worker pool whose processes import TVM and the targets' tensor intrinsics once,
    before their first (time-limited) job (:func:`tuner.engine.intrinsics.
    worker_initializer`); a worker is replaced after ``max_uses`` jobs."""
    return PopenPoolExecutor(max_workers=max_workers, timeout=timeout_sec,
                             initializer=functools.partial(worker_initializer, target_kinds),
                             maximum_process_uses=max_uses)


def _build_and_export(mod, target, artifact_dir: str) -> str:
    """Worker job: compile a scheduled IRModule and export it as a tar archive.

    Args:
        mod: The scheduled ``IRModule``.
        target: The ``tvm.target.Target``.
        artifact_dir: Directory under which the artifact is written.

    Returns:
        The path of the exported module.
    """
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build
    from tvm.support.tar import tar

    rt_mod = default_build(mod, target, None)
    path = os.path.join(tempfile.mkdtemp(dir=artifact_dir), "tvm_tmp_mod." + tar.output_format)
    rt_mod.export_library(path, fcompile=tar)
    return path


@derived_object
class PersistentBuilder(PyBuilder):
    """LocalBuilder with a persistent, pre-initialized worker pool.

    Args:
        max_workers: Parallel build processes.
        timeout_sec: Time limit of one build (the initializer is not counted).
        target_kinds: Target kinds whose tensor intrinsics workers register up front.
        max_uses: Builds after which a worker process is replaced.
        artifact_dir: Where built modules go (a temporary directory by default).
    """

    def __init__(
        self,
        *,
        max_workers: int,
        timeout_sec: float = 30.0,
        target_kinds: tuple[str, ...] = ("llvm",),
        max_uses: int = 256,
        artifact_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.max_workers = max(1, int(max_workers))
        self.timeout_sec = float(timeout_sec)
        self.target_kinds = tuple(target_kinds)
        self.max_uses = int(max_uses)
        self._own_dir = artifact_dir is None
        if artifact_dir is None:
            clean_stale_build_dirs()
        self.artifact_dir = artifact_dir or tempfile.mkdtemp(
            prefix=f"{BUILD_DIR_PREFIX}{os.getpid()}-")
        self._pool: PopenPoolExecutor | None = None

    def _get_pool(self) -> PopenPoolExecutor:
        if self._pool is None:
            self._pool = initialized_pool(self.max_workers, self.timeout_sec,
                                          self.target_kinds, self.max_uses)
        return self._pool

    def warm_up(self) -> None:
        """Start the workers now (they initialize in the background) and return at once."""
        pool = self._get_pool()
        for _ in range(self.max_workers):
            pool.submit(os.getpid)

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        """Build a batch of candidates in parallel.

        Args:
            build_inputs: The scheduled modules and their targets.

        Returns:
            One result per input: an artifact path, or an error message.
        """
        pool = self._get_pool()
        jobs = [(b.mod, b.target, self.artifact_dir) for b in build_inputs]
        results: list[BuilderResult] = []
        for res in pool.map_with_error_catching(lambda job: _build_and_export(*job), jobs):
            if res.status == StatusKind.COMPLETE:
                results.append(BuilderResult(res.value, None))
            elif res.status == StatusKind.TIMEOUT:
                results.append(
                    BuilderResult(None, f"PersistentBuilder: timeout after {self.timeout_sec} s")
                )
            else:
                results.append(BuilderResult(None, f"PersistentBuilder: {res.value}"))
        return results

    def shutdown(self) -> None:
        """Stop the worker processes and remove the artifact directory if we made it."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            stop_pool(pool)
        if self._own_dir:
            shutil.rmtree(self.artifact_dir, ignore_errors=True)
