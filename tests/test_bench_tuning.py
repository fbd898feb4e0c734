"""The benchmarks' in-process tuning helper: real rounds, curves, and its temp work dir."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))

import common  # noqa: E402

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


def test_network_ab_pairs_each_seeds_timings_against_eager(tmp_path):
    """Each build's latency counts as its ratio to PyTorch eager timed beside it; seeds
    pair the two configurations; a configuration spec without ``=`` is refused."""
    import json

    import network_ab

    with pytest.raises(SystemExit, match="NAME=OVERRIDES"):
        network_ab._configs(["nothing"])
    configs = network_ab._configs(["base=", "new=metatune.compiled_correction=true a=1"])
    assert configs == [("base", []), ("new", ["metatune.compiled_correction=true", "a=1"])]
    runs = tmp_path / "runs"
    runs.mkdir()
    for seed, (b, n) in enumerate([(0.5, 0.4), (0.6, 0.6)]):
        for e in (0, 1):
            for name, ratio in (("base", b), ("new", n)):
                torch_ms = 10.0 + e  # the machine drifts between timings; ratios do not
                (runs / f"{name}-s{seed}-e{e}.json").write_text(json.dumps(
                    {"config": name, "seed": seed, "evaluation": e, "ratio": ratio,
                     "tuned_ms": ratio * torch_ms, "torch_ms": torch_ms,
                     "tuning_seconds": 60.0 if name == "base" else 90.0}))
    args = network_ab._parse(["--network", "alexnet", "--configs", "base=", "new=x=1",
                              "--seeds", "0", "1", "--runs-dir", str(runs),
                              "--out", str(tmp_path / "page")])
    doc = network_ab._summarize(args, configs)
    assert doc["per_seed"] == pytest.approx({0: 0.8, 1: 1.0})
    assert doc["ratio"] == pytest.approx((0.8 * 1.0) ** 0.5)
    assert doc["tuning_seconds_median"] == {"base": 60.0, "new": 90.0}
    assert "0.894" in (tmp_path / "page.md").read_text()
