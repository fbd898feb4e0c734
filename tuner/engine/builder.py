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

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

from tuner.engine.intrinsics import worker_initializer

logger = logging.getLogger(__name__)


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
        self.artifact_dir = artifact_dir or tempfile.mkdtemp(prefix="metatune-build-")
        self._pool: PopenPoolExecutor | None = None

    def _get_pool(self) -> PopenPoolExecutor:
        if self._pool is None:
            self._pool = PopenPoolExecutor(
                max_workers=self.max_workers,
                timeout=self.timeout_sec,
                initializer=functools.partial(worker_initializer, self.target_kinds),
                maximum_process_uses=self.max_uses,
            )
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
            self._pool.shutdown()
            self._pool = None
        if self._own_dir:
            shutil.rmtree(self.artifact_dir, ignore_errors=True)
