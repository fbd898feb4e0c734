"""Real tuning on llvm: records land in the database, the tuned network is correct and timed
beside PyTorch, resume is exact."""

from __future__ import annotations

import json
import os

import pytest

from tuner.app.config import load_tune_config
from tuner.app.run import run_tune
from tuner.engine.database import RECORD_FILE


def _records(work_dir) -> list[str]:
    with open(os.path.join(work_dir, RECORD_FILE)) as f:
        return [line for line in f if line.strip()]


def _trace_keys(lines: list[str]) -> list[str]:
    """A key per record: its workload and its trace (the candidate measured)."""
    return [json.dumps([json.loads(ln)[0], json.loads(ln)[1][0]]) for ln in lines]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One real tuning run of the tiny conv net, shared by the tests below."""
    work = tmp_path_factory.mktemp("tune")
    overrides = [
        "network=null", "model=tests.models:tiny_convnet", "input_shape=[8,16,16]",
        f"work_dir={work}", "trials=16", "trials_per_round=8", "preset=xgb",
        "search_params.population_size=64", "search_params.init_min_unmeasured=16",
        "runner.min_repeat_ms=20", "evaluate.repeat=5", "evaluate.min_repeat_ms=20",
        "progress=false", "log_level=WARNING",
    ]
    report = run_tune(load_tune_config(overrides=overrides))
    return work, overrides, report


def test_tuning_writes_records_and_report(tuned):
    work, _, report = tuned
    lines = _records(work)
    assert len(lines) == report["trials_total"] == report["trials_run"] >= 16
    assert report["failures"] < report["trials_run"]
    with open(os.path.join(work, "report.json")) as f:
        on_disk = json.load(f)
    for key in ("network", "target", "cost_model", "search", "trials", "tuning_seconds"):
        assert key in on_disk
    assert set(on_disk["latency_ms"]) == {"tuned", "untuned", "torch", "torch_compile"}
    assert os.path.exists(os.path.join(work, "tuning_curves.png"))
    assert os.listdir(os.path.join(work, "tensorboard"))


def test_tuned_network_is_correct_and_timed_beside_pytorch(tuned):
    _, _, report = tuned
    lat = report["latency_ms"]
    assert report["check_error"] is not None and report["check_error"] < 1e-3
    assert lat["tuned"] > 0 and lat["untuned"] > 0 and lat["torch"] > 0
    # tuned and PyTorch timed side by side: 5 windows each, over the default 5 rounds
    assert report["timing"] == {"rounds": 5, "windows": 5, "min_window_ms": 20,
                                "order": "alternating", "warm_call": True, "where": "local"}
    windows = report["latency_windows_ms"]
    assert set(windows) == {"tuned", "torch"} and all(len(w) == 5 for w in windows.values())


def test_resume_measures_nothing_twice(tuned):
    work, overrides, first = tuned
    before = _records(work)
    again = run_tune(load_tune_config(overrides=overrides + ["evaluate.enabled=false"]))
    assert again["trials_run"] == 0 and _records(work) == before  # budget already met
    more = run_tune(load_tune_config(
        overrides=overrides + ["trials=24", "evaluate.enabled=false"]))
    after = _records(work)
    assert after[: len(before)] == before  # nothing lost or rewritten
    # a proposal that repeats a stored measurement is dropped, not measured: up to 8 new
    assert len(after) == len(before) + more["trials_run"] and 1 <= more["trials_run"] <= 8
    keys = _trace_keys(after)
    assert len(keys) == len(set(keys)), "a candidate was measured twice"


def _small(work, cost_model: str, search: str, trials: int = 8) -> list[str]:
    return [
        "network=null", "model=tests.models:tiny_convnet", "input_shape=[8,16,16]",
        "layout=NCHW",  # one conv task (NHWC adds the transposes at the edges as tasks)
        f"work_dir={work}", f"trials={trials}", "trials_per_round=8",
        "search_params.population_size=32", "search_params.init_min_unmeasured=8",
        "search_params.bo.population=32", "search_params.bo.pool_size=32",
        "search_params.bo.mc_samples=32",
        "runner.min_repeat_ms=10", "evaluate.enabled=false", "progress=false",
        "tensorboard=false", "log_level=WARNING", f"cost_model={cost_model}",
        f"search={search}", "metatune.from_scratch=true",
    ]


@pytest.mark.parametrize("cost_model, search", [
    ("metatune", "evolutionary"), ("mlp", "evolutionary"), ("random", "bo"),
])
def test_other_cost_models_and_searches_tune(cost_model, search, tmp_path):
    report = run_tune(load_tune_config(overrides=_small(tmp_path, cost_model, search)))
    assert report["trials_run"] >= 1 and len(_records(tmp_path)) == report["trials_run"]


def test_a_budget_in_rounds_per_task_follows_the_task_count(tmp_path):
    """``rounds_per_task`` becomes trials once the tasks are known (here one conv task)."""
    overrides = _small(tmp_path, "random", "replay") + ["rounds_per_task=2"]
    report = run_tune(load_tune_config(overrides=overrides))
    assert len(report["tasks"]) == 1
    assert report["config"]["trials"] == 16 == report["trials_run"] == len(_records(tmp_path))


def test_a_resumed_budget_per_task_tops_each_task_up_to_its_share(tmp_path):
    """A rerun with a budget per task measures only what each task still lacks of its
    share, and a rerun of a finished run measures nothing (before, the cap was the
    search's, per run, and a rerun could measure past a task's share: 6 of 5 seen)."""
    overrides = _small(tmp_path, "random", "replay", trials=64)
    first = run_tune(load_tune_config(overrides=overrides + ["trials_per_task=2"]))
    assert [t["trials"] for t in first["tasks"]] == [2]
    again = run_tune(load_tune_config(overrides=overrides + ["trials_per_task=5"]))
    assert again["trials_run"] == 3 and [t["trials"] for t in again["tasks"]] == [5]
    third = run_tune(load_tune_config(overrides=overrides + ["trials_per_task=5"]))
    assert third["trials_run"] == 0 and len(_records(tmp_path)) == 5


def test_metatune_bo_tunes_resumes_and_reports_rounds(tmp_path):
    """MetaTune + BO on a real conv: records, per-round timings and accuracy, no repeats."""
    first = run_tune(load_tune_config(overrides=_small(tmp_path, "metatune", "bo", 24)))
    assert first["trials_run"] == 24 and first["search"] == "bo"
    rounds = first["rounds"]
    assert rounds["rounds"] == 3 and rounds["measure_seconds"] > 0
    assert rounds["median_pairwise"] is not None
    with open(os.path.join(tmp_path, "rounds.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == 3 and all(r["search_s"] >= 0 and r["update_s"] >= 0 for r in rows)
    assert "novelty" not in rows[0] and rows[0]["spread"] > 0  # nothing measured before it
    assert all(r["novelty"] >= 0 and r["spread"] > 0 for r in rows[1:])  # where it explored
    more = run_tune(load_tune_config(overrides=_small(tmp_path, "metatune", "bo", 40)))
    assert more["trials_run"] == 16
    keys = _trace_keys(_records(tmp_path))
    assert len(keys) == 40 and len(keys) == len(set(keys)), "a candidate was measured twice"


def _preset(work, preset: str, trials: int) -> list[str]:
    return [
        "network=null", "model=tests.models:tiny_convnet", "input_shape=[8,16,16]",
        f"work_dir={work}", f"trials={trials}", "trials_per_round=8", f"preset={preset}",
        "search_params.rl.rollouts=8", "search_params.rl.max_steps=4",
        "runner.min_repeat_ms=10", "evaluate.enabled=false", "progress=false",
        "tensorboard=false", "log_level=WARNING",
    ]


@pytest.mark.parametrize("preset", ["RL", "meta-RL", "meta-RL-T"])
def test_rl_presets_tune(preset, tmp_path):
    """Each RL framework (xgb, MetaTune plain and super-graph, with the shipped
    checkpoints) tunes the tiny conv net."""
    report = run_tune(load_tune_config(overrides=_preset(tmp_path, preset, 8)))
    assert report["search"] == "rl" and report["preset"] == preset
    assert 1 <= report["trials_run"] <= 8 and report["failures"] < report["trials_run"]
    assert len(_records(tmp_path)) == report["trials_run"]


@pytest.mark.slow
def test_rl_resumes_without_repeats(tmp_path):
    """A rerun with a larger budget continues from the database, measuring nothing twice."""
    first = run_tune(load_tune_config(overrides=_preset(tmp_path, "meta-RL-T", 16)))
    more = run_tune(load_tune_config(overrides=_preset(tmp_path, "meta-RL-T", 24)))
    keys = _trace_keys(_records(tmp_path))
    assert len(keys) == first["trials_run"] + more["trials_run"] and more["trials_run"] >= 1
    assert len(keys) == len(set(keys)), "a candidate was measured twice"


def test_metatune_without_checkpoint_says_what_to_do(tmp_path, capsys):
    import tune

    code = tune.main(["--model", "tests.models:tiny_convnet", "--input-shape", "8,16,16",
                      "--work-dir", str(tmp_path), "--cost-model", "metatune",
                      f"metatune.checkpoint={tmp_path / 'missing.ckpt'}"])
    err = capsys.readouterr().err
    assert code == 2 and "python train.py" in err and "metatune.from_scratch=true" in err


def test_nhwc_layout_tunes_and_compiles_a_correct_network(tmp_path):
    """layout=NHWC: the convolutions are tuned in NHWC and the compiled network still
    computes the reference output (extraction and compile lower alike)."""
    overrides = _small(tmp_path, "random", "replay") + [
        "layout=nhwc", "evaluate.enabled=true", "evaluate.untuned=false", "evaluate.torch=false",
        "evaluate.repeat=2", "evaluate.min_repeat_ms=10"]
    report = run_tune(load_tune_config(overrides=overrides))
    assert report["config"]["layout"] == "NHWC"
    assert any("nhwc" in line for line in _records(tmp_path)), "no NHWC workload measured"
    assert report["check_error"] is not None and report["check_error"] < 1e-3
    assert report["latency_ms"]["tuned"] > 0
