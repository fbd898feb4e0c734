"""The attribution benchmark (``bench.attribution``): its variants load as tune
configurations, its plan's order, its page from synthetic records (nothing tuned), its
resumption, and one real run of the smallest kind (slow)."""

from __future__ import annotations

import json
import os

import pytest

from bench.attribution import runs as runs_mod
from bench.attribution.__main__ import TASKS, main
from bench.attribution.page import markdown
from bench.attribution.runs import Run, failed_record, load, plan, record_path, run_all, work
from bench.attribution.stats import pair_ratio, part_rows, sentences, variant_rows
from bench.attribution.variants import (
    BY_NAME,
    DEFAULT_VARIANTS,
    LEVER,
    PARTS,
    VARIANTS,
    Variant,
    choose,
)
from bench.frameworks.plan import FULL_TASKS


def test_every_variant_loads_as_a_tune_config_with_the_part_it_switches():
    from tuner.app.config import load_tune_config

    cfg = {v.name: load_tune_config(overrides=v.dotlist()) for v in VARIANTS}
    assert (cfg["xgb"].cost_model, cfg["xgb"].search) == ("xgb", "evolutionary")
    assert (cfg["xgb"].search_params.population_size,
            cfg["xgb"].search_params.genetic_num_iters) == (256, 4)
    assert (cfg["xgb+bo-sampler"].search_params.population_size,
            cfg["xgb+bo-sampler"].search_params.genetic_num_iters) == (96, 1)
    assert (cfg["xgb+bo"].cost_model, cfg["xgb+bo"].search) == ("xgb", "bo")
    default = cfg["default"]
    assert default.preset is None and (default.cost_model, default.search) == ("metatune", "bo")
    bo = cfg["default-xgb-sampler"].search_params.bo
    assert (bo.population, bo.genetic_iters, bo.pool_size) == (256, 4, 256)
    assert cfg["plain-graph"].metatune.graph == "plain"
    assert cfg["gcn-pretrained"].metatune.checkpoint.endswith("super-pretrained.ckpt")
    assert os.path.isabs(cfg["gcn-pretrained"].metatune.checkpoint)
    assert cfg["gcn-scratch"].metatune.from_scratch
    assert cfg["model-topk"].search_params.bo.acquisition == "model"
    assert cfg["gcn-evolutionary"].search == "evolutionary"
    assert cfg["no-finetune"].metatune.adapt_steps == 0
    assert cfg["pool-2048"].search_params.bo.pool_size == 2048
    assert not {n for p in PARTS for pair in (p.on, p.off) if pair for n in pair} - set(BY_NAME)
    assert LEVER not in {BY_NAME[n].part for n in DEFAULT_VARIANTS}
    assert set(TASKS) <= set(FULL_TASKS)
    with pytest.raises(SystemExit, match="not a variant"):
        choose(["xgb", "nope"])


def test_plan_goes_seed_then_task_then_variant():
    a, b = BY_NAME["xgb"], BY_NAME["default"]
    order = [(r.seed, r.task, r.variant.name) for r in plan([0, 1], ["t1", "t2"], [a, b])]
    assert order[:4] == [(0, "t1", "xgb"), (0, "t1", "default"), (0, "t2", "xgb"),
                         (0, "t2", "default")]
    assert order[4] == (1, "t1", "xgb") and len(order) == 8


def _record(variant: str, task: str, seed: int, bests: list[float], seconds: float,
            trials: int = 64) -> dict:
    """A finished run: rounds of 16, each ``seconds`` long, best after each from ``bests``."""
    rounds = [{"trial": 16 * (i + 1), "search_s": seconds / 2, "measure_s": seconds / 2,
               "update_s": 0.0} for i in range(len(bests))]
    return {"variant": variant, "part": BY_NAME[variant].part, "task": task, "seed": seed,
            "status": "ok", "trials_planned": trials, "batch": 16, "rounds": rounds,
            "curve": [[16 * (i + 1), b] for i, b in enumerate(bests)],
            "tuning_seconds": seconds * len(bests), "best_ms": bests[-1],
            "date": f"2026-12-08T0{seed}:00:00+00:00"}


def _records() -> list[dict]:
    out = []
    for task in ("net/a", "net/b"):
        out += [_record("xgb", task, 0, [4.0, 3.0, 2.0, 2.0], 10.0),
                # twice as fast per round: at xgb's time for 32 trials it has done 64
                _record("default", task, 0, [2.0, 1.5, 1.5, 1.0], 5.0),
                _record("no-finetune", task, 0, [2.0, 2.0, 2.0, 2.0], 5.0)]
    return out


def test_pair_ratio_by_trials_and_at_the_reference_time():
    xgb, default, _ = _records()[:3]
    assert pair_ratio(default, xgb, 32, False) == (True, 0.5)
    assert pair_ratio(default, xgb, 32, True) == (True, pytest.approx(1 / 3))  # 20 s: 64th
    assert pair_ratio(default, xgb, 16, True) == (True, 0.375)  # 10 s: its 32nd, 1.5 / 4
    assert pair_ratio(xgb, default, 16, True) == (True, None)  # no result of xgb's in 5 s
    assert pair_ratio(default, xgb, 128, False) == (False, None)  # past the budget


def test_page_from_synthetic_records_pairs_within_task_and_seed():
    records = _records()
    variants = choose(["xgb", "default", "no-finetune"])
    rows = variant_rows(records, variants, 64)
    by = {r["variant"]: r for r in rows}
    assert by["xgb"]["at_trials"][64] == {"ratio": 1.0, "n": 2, "none": 0}
    assert by["default"]["at_trials"][64]["ratio"] == pytest.approx(0.5)
    assert by["default"]["at_trials"][512]["n"] == 0  # not run: '-'
    assert by["default"]["tuning_s"] == 20.0 and by["xgb"]["tuning_s"] == 40.0
    parts = part_rows(records, 64)
    tuning = next(p for p in parts if p["part"] == "online fine-tuning")
    assert tuning["off"]["trials"]["gain"] == pytest.approx(2.0) and "on" not in tuning
    everything = next(p for p in parts if p["part"] == "everything")
    assert everything["on"]["trials"]["gain"] == pytest.approx(2.0)
    said = sentences(rows, parts, 64)
    assert 3 <= len(said) <= 6
    assert said[0].startswith("All parts together (the default) reach 0.50x xgb's best")
    assert said[1].endswith("it pays): online fine-tuning 2.00x.")
    doc = {"command": "python -m bench.attribution --seeds 0", "date": "2026-12-08",
           "measured": None, "machines": ["- `znver4`: AMD EPYC"], "layout": "NHWC",
           "tasks": ["net/a", "net/b"], "seeds": [0], "trials": 64, "batch": 16,
           "runs_dir": "docs/bench/runs/attribution/x", "runs_done": 6, "runs_planned": 8,
           "skipped": {"gcn-pretrained": [["ckpt", "python train.py meta.steps=0"]]},
           "failed": [{**failed_record(Run(0, "net/a", BY_NAME["xgb"]), 64, 16, "boom\nx")}],
           "rows": rows, "parts": parts, "sentences": said}
    page = markdown(doc)
    assert page.startswith("# What each part earns")
    assert "| default | all | 0.500 (2) |" in page
    assert "| 0.500 (2) | - | " in page  # the 512 column not run
    assert "| online fine-tuning | - | - | - | default / no-finetune | 2.000 (2) |" in page
    assert "**skipped** `gcn-pretrained`" in page and "`python train.py meta.steps=0`" in page
    assert "**failed** `net/a` xgb seed 0: boom" in page
    assert "other processes took" not in page
    assert "2 of the runs tuned while other processes" in markdown({**doc, "runs_loaded": 2})
    assert markdown({**doc, "title": "Does X pay?"}).startswith("# Does X pay?\n")


def test_run_all_resumes_and_retries_failed_runs_only_on_request(tmp_path, monkeypatch):
    calls = []

    def fake_worker(cmd):
        out = cmd[cmd.index("--worker") + 4]
        calls.append(cmd[cmd.index("--worker") + 2])
        status = "failed" if "bad" in out else "ok"
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"status": status}, f)
        return 1 if status == "failed" else 0

    monkeypatch.setattr(runs_mod, "spawn", fake_worker)
    missing = Variant("needs-ckpt", "cost model", None, (), "x",
                      (("checkpoints/none-such.ckpt", "python train.py out=x"),))
    runs = plan([0], ["net/a", "net/bad"], [BY_NAME["xgb"], missing])
    first = run_all(runs, str(tmp_path), 16, 16, "bench.attribution", [])
    assert (first.ran, first.failed, first.done_before) == (2, 1, 0)
    assert first.skipped == {"needs-ckpt": [("checkpoints/none-such.ckpt",
                                             "python train.py out=x")]}
    assert os.path.exists(record_path(str(tmp_path), 16, 16, runs[0]))
    calls.clear()
    again = run_all(runs, str(tmp_path), 16, 16, "bench.attribution", [])
    assert (again.ran, again.done_before, calls) == (0, 2, [])
    retried = run_all(runs, str(tmp_path), 16, 16, "bench.attribution", [], retry_failed=True)
    assert retried.ran == 1 and calls == ["xgb"]


def test_a_worker_that_dies_without_a_record_is_recorded_as_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(runs_mod, "spawn", lambda cmd: -9)
    runs = plan([0], ["net/a"], [BY_NAME["xgb"]])
    assert run_all(runs, str(tmp_path), 16, 16, "bench.attribution", []).failed == 1
    rec = json.loads(open(record_path(str(tmp_path), 16, 16, runs[0])).read())
    assert rec["status"] == "failed" and "status -9" in rec["error"]
    assert load(str(tmp_path), 16) == ([], [rec])


def test_work_records_a_failed_tuning_with_its_error(tmp_path, monkeypatch):
    import bench.common

    def fail(*args, **kwargs):
        raise RuntimeError("builder died")

    monkeypatch.setattr(bench.common, "tune_one_task", fail)
    out = str(tmp_path / "r.json")
    assert work(Run(1, "net/a", BY_NAME["default"]), 16, 16, out, []) == 1
    rec = json.loads(open(out).read())
    assert rec["status"] == "failed" and rec["error"].startswith("RuntimeError: builder died")
    assert (rec["variant"], rec["seed"], rec["task"]) == ("default", 1, "net/a")


def test_load_keeps_the_longest_finished_run_of_each_task_variant_and_seed(tmp_path):
    short = _record("xgb", "net/a", 0, [2.0], 1.0, trials=16)
    long_ = _record("xgb", "net/a", 0, [2.0, 1.0], 1.0, trials=32)
    for rec, trials in ((short, 16), (long_, 32)):
        path = record_path(str(tmp_path), trials, 16, Run(0, "net/a", BY_NAME["xgb"]))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(rec, f)
    finished, failed = load(str(tmp_path), 16)
    assert [r["trials_planned"] for r in finished] == [32] and failed == []


@pytest.mark.slow
def test_one_real_run_records_and_writes_the_page(tmp_path):
    out = tmp_path / "page"
    args = ["--tasks", "tests.models:one_conv/fused_conv2d_add_relu1", "--variants", "xgb",
            "--seeds", "0", "--trials", "16", "--runs-dir", str(tmp_path / "runs"),
            "--out", str(out), "search_params.population_size=32",
            "search_params.init_min_unmeasured=16", "runner.min_repeat_ms=20"]
    assert main(args) == 0
    (rec,) = load(str(tmp_path / "runs"), 16)[0]
    assert rec["status"] == "ok" and rec["variant"] == "xgb" and rec["layout"] == "NHWC"
    assert rec["trials"] == 16 and rec["curve"][-1][0] == 16 and rec["code"]
    assert "| xgb | all | 1.000 (1) |" in out.with_suffix(".md").read_text()
