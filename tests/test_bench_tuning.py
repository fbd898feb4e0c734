"""The benchmarks' in-process tuning helper: real rounds, curves, and its temp work dir."""

from __future__ import annotations

import tempfile

import pytest

from bench import common

SMALL = ["preset=xgb", "search_params.population_size=64",
         "search_params.init_min_unmeasured=16", "runner.min_repeat_ms=20"]


@pytest.fixture
def conv_task():
    from tuner.engine.networks import load_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import extract_tasks

    net = load_network(model_spec="tests.models:tiny_convnet", input_shape=(8, 16, 16))
    tasks = extract_tasks(net.relax_mod, resolve_target("llvm").target)
    return next(t for t in tasks if "conv" in t.name)


def test_tune_tasks_measures_rounds_and_removes_its_work_dir(conv_task, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    outcome, rounds, curves, cfg = common.tune_tasks(
        [conv_task], [*SMALL, "trials=16", "trials_per_round=8"], prefix="bench-test-")
    assert outcome.trials_run == 16 and outcome.best_ms[0] > 0 and cfg.trials == 16
    assert outcome.trials_per_task == [16]
    assert [r["trial"] for r in rounds] == [8, 16]
    assert [c["trial"] for c in curves] == [8, 16]
    assert curves[-1]["task_best_ms"] == pytest.approx(outcome.best_ms[0])
    assert not list(tmp_path.glob("bench-test-*"))


def test_tune_tasks_keeps_its_work_dir_when_tuning_fails(conv_task, tmp_path, monkeypatch,
                                                         capsys):
    import tuner.app.tuning

    def fail(*args, **kwargs):
        raise RuntimeError("builder died")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tuner.app.tuning, "tune", fail)
    with pytest.raises(RuntimeError, match="builder died"):
        common.tune_tasks([conv_task], [*SMALL, "trials=8"], prefix="bench-test-")
    kept = list(tmp_path.glob("bench-test-*"))
    assert len(kept) == 1 and str(kept[0]) in capsys.readouterr().err
