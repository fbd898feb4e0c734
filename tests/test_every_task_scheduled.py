"""No task is left with TVM's default schedule, and the budget is exact."""

from __future__ import annotations

import os

import pytest

from tuner.app.config import load_tune_config
from tuner.app.run import run_tune
from tuner.engine.database import RECORD_FILE
from tuner.engine.scheduler import RoundBudget, round_size


def test_round_size_shares_the_first_pass_and_cuts_the_last_round():
    assert round_size(128, 16, first_pass_left=13) == 9  # alexnet: every task gets a round
    assert round_size(8, 16, first_pass_left=13) == 1  # too small a budget: 1 each, in order
    assert round_size(500, 16, first_pass_left=13) == 16
    assert round_size(5, 16, first_pass_left=0) == 5  # the last round is cut to what is left
    assert round_size(500, 16, first_pass_left=13, first_round=4) == 4  # a look at each
    assert round_size(20, 16, first_pass_left=13, first_round=4) == 1  # the share still binds
    assert round_size(500, 16, first_pass_left=0, first_round=4) == 16  # then full rounds
    budget = RoundBudget(remaining=10, limit=4)
    assert budget.take(16) == 4 and budget.remaining == 6
    budget.limit = None
    assert budget.take(16) == 6 and budget.take(16) == 0


def test_with_predictions_serves_a_stored_pick(context_and_candidates, tmp_path):
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from tuner.search.zero_shot import open_predictions, with_predictions

    ctx, candidates = context_and_candidates
    store = open_predictions(str(tmp_path))
    store.commit_tuning_record(ms.database.TuningRecord(
        candidates[0].sch.trace, store.commit_workload(ctx.mod), None, ctx.target,
        ArgInfo.from_prim_func(ctx.mod["main"])))
    measured = ms.database.MemoryDatabase()
    assert measured.query_schedule(ctx.mod, ctx.target, "main") is None
    sch = with_predictions(measured, str(tmp_path)).query_schedule(ctx.mod, ctx.target, "main")
    assert sch is not None and len(sch.trace.insts) == len(candidates[0].sch.trace.insts)


@pytest.fixture(scope="module")
def starved(tmp_path_factory):
    """A 3-trial budget on a network of more tasks than that, with the shipped checkpoint."""
    work = tmp_path_factory.mktemp("starved")
    overrides = [
        "network=null", "model=tests.models:tiny_classifier", "input_shape=[4,8,8]",
        f"work_dir={work}", "trials=3", "trials_per_round=8",
        "search_params.bo.population=32", "search_params.bo.pool_size=32",
        "search_params.bo.mc_samples=32", "predict_unmeasured.population=32",
        "predict_unmeasured.genetic_iters=1", "predict_unmeasured.candidates=8",
        "runner.min_repeat_ms=10", "evaluate.repeat=3", "evaluate.min_repeat_ms=10",
        "evaluate.untuned=false", "progress=false", "tensorboard=false", "log_level=WARNING",
    ]
    return work, run_tune(load_tune_config(overrides=overrides))


def test_every_task_is_measured_or_predicted_and_correct(starved):
    work, report = starved
    sources = [t["schedule"] for t in report["tasks"]]
    assert len(sources) > 3 and "default" not in sources
    assert sources.count("measured") == 3 and "predicted" in sources
    assert sum(t["trials"] for t in report["tasks"]) == report["trials_total"] == 3
    with open(os.path.join(work, RECORD_FILE)) as f:
        assert sum(1 for line in f if line.strip()) == 3 == report["trials_total"]
    assert report["check_error"] is not None and report["check_error"] < 1e-3
    assert report["runtime"]["tvm_threads"] == report["runtime"]["num_cores"]


def test_the_compile_finds_each_predicted_schedule(starved):
    from tuner.engine.database import open_database
    from tuner.engine.networks import load_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks
    from tuner.search.zero_shot import with_predictions

    work, report = starved
    target = resolve_target("llvm").target
    net = load_network(model_spec="tests.models:tiny_classifier", input_shape=(4, 8, 8))
    lowering = Lowering(layout=report["config"]["layout"])  # as the run extracted them
    tasks = {t.name: t for t in extract_tasks(net.relax_mod, target, lowering)}
    database = with_predictions(open_database(str(work)), str(work))
    predicted = [t["name"] for t in report["tasks"] if t["schedule"] == "predicted"]
    for name in predicted:
        mod = tasks[name].extracted.dispatched[0]
        assert database.query_schedule(mod, target, name) is not None, name


def test_retime_times_a_groups_builds_side_by_side(starved, tmp_path, monkeypatch):
    import json
    import shutil
    import sys

    from bench import retime_networks

    work, _ = starved
    root = tmp_path / "work"
    for preset in ("xgb", "meta-BO-T"):
        shutil.copytree(work, root / f"net-tiny-{preset}-r3")
    argv = ["retime_networks.py", "--network", "tiny", "--presets", "xgb", "meta-BO-T",
            "--work-root", str(root), "--runs-dir", str(tmp_path / "runs"),
            "--rounds", "2", "--windows", "2", "--min-window-ms", "5"]
    monkeypatch.setattr(sys, "argv", argv)
    retime_networks.main()
    record = json.loads((tmp_path / "runs" / "retime-tiny-r3.json").read_text())
    assert set(record["latency_ms"]) == {"xgb", "meta-BO-T", "torch"}
    assert all(len(w) == 2 for w in record["latency_windows_ms"].values())
    assert record["over_xgb"]["xgb"] == 1.0 and max(record["check_error"].values()) < 1e-3
    assert record["runtime"]["tvm_threads"] >= 1 and record["runs"]["xgb"]["trials"] == 3
    # a preset whose run is missing: say which, and what to run
    monkeypatch.setattr(sys, "argv", argv[:4] + ["RL", *argv[6:]])
    with pytest.raises(SystemExit, match="RL run has not finished"):
        retime_networks.main()
