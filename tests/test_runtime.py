"""TVM runs with the target's cores: in this process (the evaluator) and in the runner."""

from __future__ import annotations

import os

import pytest

from tuner.app.config import RunnerConfig
from tuner.app.factories import make_runner
from tuner.engine.runtime import configure_tvm_threads, runtime_info, tvm_num_threads
from tuner.engine.targets import host_num_cores, resolve_target

#: A count that TVM's own default (half the hardware threads) never gives on CI's 2 cores.
THREADS = 3

RUNNER_CFG = RunnerConfig(timeout_sec=30, number=1, repeat=1, min_repeat_ms=0,
                          enable_cpu_cache_flush=False)


@pytest.fixture
def restore_threads(monkeypatch):
    """Put this process's pool and environment back to the host's cores afterwards."""
    monkeypatch.setenv("TVM_NUM_THREADS", str(host_num_cores()))
    yield
    configure_tvm_threads(host_num_cores())


def test_resolve_target_sets_the_evaluators_threads(restore_threads):
    # TVM's own default is half the hardware threads: 1 on CI's 2 cores.
    cores = host_num_cores()
    info = resolve_target("llvm")
    assert info.num_cores == cores
    assert tvm_num_threads() == cores  # read back from the runtime, not the env
    assert runtime_info(info.num_cores)["tvm_threads"] == cores


def test_num_cores_below_the_host_shrinks_the_pool(restore_threads):
    assert resolve_target("llvm", num_cores=1).num_cores == 1
    assert tvm_num_threads() == 1
    assert configure_tvm_threads(host_num_cores()) == host_num_cores()


def test_measurement_worker_runs_with_num_cores_threads(restore_threads):
    configure_tvm_threads(1)  # the parent's count must not leak into the worker
    runner = make_runner(RUNNER_CFG, ("llvm",), THREADS)
    try:
        assert runner.pool.submit(tvm_num_threads).result() == THREADS
    finally:
        runner.pool.shutdown()


def test_pool_defaults_take_the_target_cores_capped_by_the_host_and_keep_the_users(
        monkeypatch):
    from metatune.tvm_env import set_pool_defaults

    cores = host_num_cores()
    for asked, want in ((None, cores), (1, 1), (cores + 4, cores)):
        monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
        set_pool_defaults(asked)
        assert os.environ["TVM_NUM_THREADS"] == str(want)
    monkeypatch.setenv("TVM_NUM_THREADS", "7")  # the user's setting is left alone
    set_pool_defaults(1)
    assert os.environ["TVM_NUM_THREADS"] == "7"
