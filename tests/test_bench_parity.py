"""The PyTorch-parity page (``bench.pytorch_parity``): conv matching by shapes or FLOPs,
kernel sums, goal lines."""

from __future__ import annotations

import json
import os

from bench import pytorch_parity as parity
from bench.parity_convs import match_tasks


def _record(network, budget, tuned, torch_ms, minutes):
    tasks = [{"name": "fused_conv2d_add_relu", "flops": 1.05e9, "weight": 2, "best_ms": 4.0,
              "schedule": "measured"},
             {"name": "max_pool2d", "flops": 1e6, "weight": 1, "best_ms": None,
              "schedule": "predicted"}]
    return {"network": network, "seed": 0, "budget": budget, "preset": "meta-BO-T",
            "latency_ms": {"tuned": tuned, "torch": torch_ms, "torch_compile": torch_ms},
            "check_error": 1e-6, "tuning_seconds": minutes * 60,
            "tuning_seconds_total": minutes * 60, "trials_total": budget, "failures": 0,
            "tasks": tasks, "target": "llvm -mcpu=x (2 cores)",
            "runtime": {"tvm_threads": 2, "torch_threads": 2},
            "machine": {"cpu": "cpu", "cpu_flags": ["avx2"]}}


def test_convs_pair_with_the_task_of_nearest_flops():
    convs = [{"layer": "features.0", "flops": 1.0e9, "torch_ms": 2.0, "shape": [3, 64]},
             {"layer": "odd", "flops": 5.0e9, "torch_ms": 1.0, "shape": [3, 64]}]
    rows = match_tasks(convs, _record("n", 512, 1, 1, 1)["tasks"])
    assert rows[0]["task"] == "fused_conv2d_add_relu" and rows[0]["tvm_gflops"] == 250.0
    assert rows[1]["task"] is None and rows[1]["tvm_gflops"] is None  # nothing within 10 %


def test_convs_pair_with_the_task_of_the_same_shapes():
    conv = {"layer": "layer1.0.conv1", "flops": 2.3e8, "torch_ms": 2.0,
            "shape": [64, 64, 3, 1, 1, 56]}
    same_flops = {"name": "fused_conv2d3_add3", "flops": 2.3e8, "best_ms": 9.0,
                  "args": [[1, 128, 28, 28], [128, 128, 3, 3], [1, 128, 28, 28]]}
    match = {"name": "fused_conv2d1_add1_relu1", "flops": 2.3e8, "best_ms": 1.0,
             "args": [[1, 64, 56, 56], [64, 64, 3, 3], [1, 64, 1, 1], [1, 64, 56, 56]]}
    residual = {"name": "fused_conv2d1_add1_add2_relu1", "flops": 2.4e8, "best_ms": 1.1,
                "args": [[1, 64, 56, 56], [64, 64, 3, 3], [1, 64, 1, 1], [1, 64, 56, 56],
                         [1, 64, 56, 56]]}
    (row,) = match_tasks([conv], [same_flops, residual, match])
    assert row["task"] == "fused_conv2d1_add1_relu1" and row["tvm_gflops"] == 230.0


def test_page_states_the_goals(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    for rec in (_record("resnet-18", 512, 30.0, 20.0, 10), _record("resnet-18", 1024, 19.0,
                                                                   20.0, 25)):
        (runs / "NHWC").mkdir(exist_ok=True)
        (runs / "NHWC" / f"resnet-18-s0-{rec['budget']}.json").write_text(json.dumps(rec))
    monkeypatch.setattr(parity, "RUNS", str(runs))
    monkeypatch.setattr(parity, "OUT", str(tmp_path / "page"))
    parity.write_page(["resnet-18", "alexnet"], [0], [512, 1024], ["NCHW", "NHWC"])
    text = (tmp_path / "page.md").read_text()
    assert "NHWC: resnet-18 at or below PyTorch eager within 30 tuning minutes: **reached** " \
        "at 1024 trials (25.0 min)" in text
    assert "NCHW: resnet-18 at or below PyTorch eager within 30 tuning minutes: **not " \
        "reached** (not run yet)" in text
    assert "NHWC: alexnet at or below 1.0x PyTorch eager at 1024 trials: not run yet" in text
    assert "| NHWC | resnet-18 | 1024 | 0 | x | 19.0 |" in text
    assert "| 8.0 |" in text  # the measured conv, weight 2 x 4 ms; the predicted pool left out


def test_nhwc_convs_pair_with_their_nhwc_task():
    conv = {"layer": "layer1.0.conv1", "flops": 2.3e8, "torch_ms": 2.0,
            "shape": [64, 64, 3, 1, 1, 56], "out_size": 56}
    task = {"name": "fused_conv2d1_add1_relu11", "flops": 2.3e8, "best_ms": 1.0,
            "args": [[1, 56, 56, 64], [64, 3, 3, 64], [1, 1, 1, 64], [1, 56, 56, 64]]}
    other = {**task, "name": "fused_conv2d3", "args": [[1, 28, 28, 128], [128, 3, 3, 128],
                                                      [1, 28, 28, 128]]}
    (row,) = match_tasks([conv], [other, task])
    assert row["task"] == "fused_conv2d1_add1_relu11"


def test_model_specs_get_model_flags_and_short_record_names(tmp_path):
    spec = "torchvision.models:resnet34"
    assert parity.network_args(spec) == ["--model", spec]
    assert parity.network_args("alexnet") == ["--network", "alexnet"]
    assert parity.record_path(spec, 1, 512, str(tmp_path)) == str(tmp_path / "resnet34-s1-512.json")


def test_a_stage_counts_earlier_minutes_only_when_it_continues_their_work_dir(
        tmp_path, monkeypatch):
    def fake_tune(cmd, **_kw):  # tune.py: writes the work dir's report, 60 s a stage
        work = cmd[cmd.index("--work-dir") + 1]
        budget = int(cmd[cmd.index("--trials") + 1])
        rec = _record("squeezenet", budget, 1.0, 1.0, 1)
        rec["config"] = {"layout": "NHWC"}
        os.makedirs(work, exist_ok=True)
        with open(f"{work}/report.json", "w", encoding="utf-8") as f:
            json.dump(rec, f)

    monkeypatch.setattr(parity.subprocess, "run", fake_tune)
    runs = tmp_path / "runs"
    runs.mkdir()
    # 512 recorded by an earlier machine whose work dir is gone: 1024 starts afresh
    (runs / "squeezenet-s0-512.json").write_text(json.dumps(_record("squeezenet", 512, 1, 1, 9)))
    work_root = str(tmp_path / "work")
    fresh = parity.run_stage("squeezenet", 0, 1024, work_root, [], runs=str(runs))
    assert fresh["continued_from"] is None and fresh["tuning_seconds_total"] == 60
    resumed = parity.run_stage("squeezenet", 0, 2048, work_root, [], runs=str(runs))
    assert resumed["continued_from"] == 1024 and resumed["tuning_seconds_total"] == 120


def test_seeds_run_on_two_cpus_keep_their_own_ratios(tmp_path, monkeypatch):
    folder = tmp_path / "runs" / "NHWC"
    folder.mkdir(parents=True)
    for seed, cpu, tuned, eager in ((0, "icelake-server", 10.0, 20.0), (1, "rocketlake", 30.0,
                                                                         40.0)):
        rec = _record("alexnet", 2048, tuned, eager, 20)
        rec.update(seed=seed, target=f"llvm -mcpu={cpu} (2 cores)")
        (folder / f"alexnet-s{seed}-2048.json").write_text(json.dumps(rec))
    monkeypatch.setattr(parity, "RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(parity, "OUT", str(tmp_path / "page"))
    parity.write_page(["alexnet"], [0, 1], [2048], ["NHWC"])
    text = (tmp_path / "page.md").read_text()
    assert "| NHWC | alexnet | 2048 | 0, 1 | icelake-server / rocketlake | 10.0 / 30.0 | " \
        "20.0 / 40.0 | 20.0 / 40.0 | 0.50 / 0.75 | 0.62 |" in text
    assert "- `rocketlake`: cpu" in text and "**Several machines**" in text
    assert "alexnet at or below 1.0x PyTorch eager at 2048 trials: **reached**: 0.62x eager " \
        "(median of the 2 of 2 seeds run at 2048 trials)" in text
