"""The benchmarks' in-process tuning helper: real rounds, curves, and its temp work dir."""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
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


def test_pool_headroom_expected_best_of_random_is_the_mean_over_all_draws():
    import itertools

    import pool_headroom

    secs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6]
    draws = list(itertools.combinations(secs, 3))
    assert pool_headroom.expected_best_of_random(secs, 3) == pytest.approx(
        sum(min(d) for d in draws) / len(draws))
    assert pool_headroom.expected_best_of_random(secs, 10) == 1.0  # the whole pool


def test_pool_headroom_ratios_use_the_second_timing(monkeypatch):
    """Each choice's best is picked on the first timing and counted on the second; the
    unadapted ranking is the adapted one in round 1 (nothing measured before)."""
    import pool_headroom

    monkeypatch.setattr(pool_headroom, "BATCH", 2)
    rows = [  # BO picks rows 0 and 3; the model's top 2 by prior are rows 1 and 2
        {"prior": 0.1, "picked": True, "seconds": 2.0, "seconds_again": 2.2},
        {"prior": 0.9, "picked": False, "seconds": 1.0, "seconds_again": 1.1},
        {"prior": 0.8, "picked": False, "seconds": 4.0},
        {"prior": 0.2, "picked": True, "seconds": 3.0},
    ]
    run = {"workload": "w", "seed": 0, "round": 1, "pool": 4, "history_best_s": None,
           "rows": rows}
    h = pool_headroom.headroom(run)
    assert h["bo"] == pytest.approx(2.2 / 1.1) and h["top"] == h["top0"] == 1.0
    assert h["random"] == pytest.approx((1.0 * 3 + 2.0 * 2 + 3.0 * 1) / 6 / 1.0)
    assert h["pool_best_rank"] == h["pool_best_rank0"] == 1 and h["pairwise"] == h["pairwise0"]
    later = {**run, "round": 2, "history_best_s": 1.65,
             "rows": [{**r, "prior0": -r["prior"]} for r in rows]}
    h2 = pool_headroom.headroom(later)
    assert h2["pool_over_history"] == pytest.approx(1.1 / 1.65)
    assert h2["top0"] == pytest.approx(2.2 / 1.1)  # the unadapted top 2: rows 0 and 3
    assert h2["pairwise0"] == pytest.approx(1.0 - h2["pairwise"])
    summary = pool_headroom.summarize([run, later])
    assert summary["1"]["bo_is_pool_best"] == 0 and summary["2"]["runs"] == 1
    page = pool_headroom.markdown({"command": "c", "date": "d", "machine": "m",
                                   "measured": None, "config": "x", "seeds": [0],
                                   "workloads": ["w"], "summary": summary,
                                   "runs": [{**r, "headroom": pool_headroom.headroom(r)}
                                            for r in (run, later)]})
    assert "| 2 | 1 |" in page and "2.000" in page


def test_pool_headroom_measures_a_whole_round_of_a_real_task(conv_task, tmp_path, monkeypatch):
    """Round 2 of a real BO run: the BO search still picks its batch, every pool candidate
    is measured, the unadapted model scores the same pool, and the schedules compared are
    timed twice; the search is restored afterwards."""
    import pool_headroom
    import tuner.search.bo as bo

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    select, generate = bo.select_batch, bo.BatchBOSearch._cls.generate_measure_candidates
    run = pool_headroom.measure_pool(conv_task, [
        "preset=meta-BO-T", "search_params.bo.pool_size=24", "search_params.bo.population=24",
        "search_params.bo.carry=8", "runner.min_repeat_ms=20"], seed=0, full_round=2,
        variants=[("same", []), ("s20", ["metatune.adapt_steps=20"])])
    assert bo.select_batch is select
    assert bo.BatchBOSearch._cls.generate_measure_candidates is generate
    rows = run["rows"]
    assert run["round"] == 2 and run["pool"] == len(rows) > pool_headroom.BATCH
    assert sum(r["picked"] for r in rows) == pool_headroom.BATCH
    assert all(r["prior0"] is not None for r in rows)
    # a variant with tuning's own settings, adapted once on all the measurements before
    # the round, scores the pool as tuning's model did after adapting round by round
    prior = np.array([r["prior"] for r in rows])
    assert np.allclose([r["variants"]["same"] for r in rows], prior, atol=1e-5)
    assert not np.allclose([r["variants"]["s20"] for r in rows], prior, atol=1e-5)
    assert run["measured_ok"] >= pool_headroom.BATCH and run["history_best_s"] > 0
    assert any(r.get("seconds_again") for r in rows)
    h = pool_headroom.headroom(run)
    assert h["bo"] >= 0.5 and h["random"] >= 1.0 and 0.0 <= h["pairwise0"] <= 1.0
    assert h["pairwise_same"] == pytest.approx(h["pairwise"]) and h["top_s20"] >= 0.5
    summary = pool_headroom.summarize([run])["2"]["variants"]
    assert set(summary) == {"same", "s20"} and summary["s20"]["runs"] == 1
    assert summary["same"]["rise"] == pytest.approx(h["pairwise"] - h["pairwise0"])
    page = pool_headroom.markdown({
        "command": "c", "date": "d", "machine": "m", "measured": None, "config": "x",
        "seeds": [0], "workloads": ["w"], "variants": {"same": "", "s20": "a=20"},
        "summary": pool_headroom.summarize([run]),
        "runs": [{**run, "workload": "w", "headroom": h}]})
    assert "| 2 | s20 |" in page and "| 2 | online (tuning's) |" in page
    assert "`s20`: `a=20`" in page
