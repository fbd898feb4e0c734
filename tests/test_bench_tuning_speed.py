"""The tuning-speed benchmark (``bench.tuning_speed``): the ladder's order, resuming past
finished rungs, the results from synthetic records and the page; nothing is tuned except
in the slow smoke test."""

from __future__ import annotations

import json
import math
import os

import pytest

from bench import tuning_speed as ts
from bench import tuning_speed_page as tsp
from bench import tuning_speed_records as rec
from bench import tuning_speed_timing as tst

PLATFORM = "llvm-test"
MACHINE = {"cpu": "Test CPU", "cpu_flags": ["avx2"], "date": "2026-12-07T08:00:00+00:00"}
PROV = {"command": "python -m bench.tuning_speed --budgets 128", "date": "2026-12-07",
        "machine": "Test CPU", "target": "llvm -mcpu=test (2 cores)",
        "runtime": {"tvm_threads": 2, "torch_threads": 2}}


def test_plan_is_budget_major_seeds_in_order_presets_alternating():
    rungs = ts.plan(["a", "b"], ["xgb", "default"], [0, 1], [256, 128])
    assert [r.budget for r in rungs] == [128] * 8 + [256] * 8
    assert [(r.seed, r.network, r.preset) for r in rungs[:8]] == [
        (0, "a", "xgb"), (0, "a", "default"), (0, "b", "default"), (0, "b", "xgb"),
        (1, "a", "xgb"), (1, "a", "default"), (1, "b", "default"), (1, "b", "xgb")]
    assert len(set(rungs)) == 16


def test_names_of_records_and_work_dirs():
    assert rec.slug("torchvision.models:regnet_y_400mf") == "regnet-y-400mf"
    assert rec.slug("resnet-18") == "resnet-18"
    assert rec.record_path("r", "p", "torchvision.models:mobilenet_v3_small", "xgb", 2) \
        == os.path.join("r", "p", "mobilenet-v3-small-xgb-s2.json")
    assert ts.work_dir("w", ts.Rung("mobilenet-v2", "default", 1, 128)) \
        == os.path.join("w", "mobilenet-v2-default-s1")
    assert ts.tune_args(ts.Rung("n", "xgb", 1, 128), ["x=1"])[:3] == ["seed=1", "preset=xgb",
                                                                       "x=1"]
    assert not any(a.startswith("preset=") for a in ts.tune_args(ts.Rung("n", "default", 0,
                                                                         128), []))


def test_tune_args_are_checked_against_tune_py(monkeypatch):
    class Done:
        stdout = "usage: tune.py [--repair-db] [--no-memory]\n  --no-memory  neither read ..."

    monkeypatch.setattr(ts.subprocess, "run", lambda *a, **k: Done)
    ts.check_tune_args()  # the real TUNE_ARGS pass it
    monkeypatch.setattr(ts, "TUNE_ARGS", ())
    with pytest.raises(SystemExit, match="add it to TUNE_ARGS"):
        ts.check_tune_args()
    monkeypatch.setattr(ts, "TUNE_ARGS", ("--no-memory", "--gone"))
    with pytest.raises(SystemExit, match="does not take --gone"):
        ts.check_tune_args()


def _report(total: int, run: int, seconds: float) -> dict:
    return {"trials_total": total, "trials_run": run, "tuning_seconds": seconds,
            "predict_seconds": 1.0, "preset": "xgb", "failures": 0, "tasks": [],
            "target": "llvm -mcpu=test (2 cores)", "machine": MACHINE,
            "runtime": {"tvm_threads": 2, "torch_threads": 2}, "code": "abc"}


def test_ladder_resumes_past_finished_rungs_and_adds_up_tuning_time(tmp_path, monkeypatch):
    calls = []

    def tune(network, budget, work, extra):
        calls.append(("tune", network, budget))
        before = max([c[2] for c in calls[:-1] if c[1] == network] or [0])
        return _report(budget, budget - before, budget / 16)

    def export(work, budget):
        out = ts.artifact_dir(work, budget)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump({"check_error": 1e-6}, f)
        calls.append(("export", os.path.basename(work), budget))
        return out, {"check_error": 1e-6}, 0.5

    monkeypatch.setattr("bench.runtimes.tune_work_dir", tune)
    monkeypatch.setattr(ts, "export_rung", export)
    runs, work = str(tmp_path / "runs"), str(tmp_path / "work")
    rungs = ts.plan(["net"], ["xgb"], [0], [128, 256])
    assert ts.run_ladder(rungs[:1], work, runs, PLATFORM, [], "cmd", None) == 1
    assert ts.run_ladder(rungs, work, runs, PLATFORM, [], "cmd", None) == 1  # 128 skipped
    assert [c[0] + str(c[2]) for c in calls] == ["tune128", "export128", "tune256",
                                                 "export256"]
    record = rec.read_json(rec.record_path(runs, PLATFORM, "net", "xgb", 0))
    assert [r["cumulative_tuning_seconds"] for r in record["rungs"]] == [8.0, 24.0]
    assert [r["untimed_trials"] for r in record["rungs"]] == [0, 0]
    assert ts.run_ladder(rungs, work, runs, PLATFORM, [], "cmd", None) == 0  # all done
    # a build lost: exported again, not tuned again, its times kept
    import shutil

    shutil.rmtree(ts.artifact_dir(os.path.join(work, "net-xgb-s0"), 256))
    calls.clear()
    assert ts.run_ladder(rungs, work, runs, PLATFORM, [], "cmd", None) == 1
    assert [c[0] for c in calls] == ["export"]
    again = rec.read_json(rec.record_path(runs, PLATFORM, "net", "xgb", 0))
    assert again["rungs"][1]["cumulative_tuning_seconds"] == 24.0


def test_ladder_stops_between_rungs_at_max_minutes(tmp_path, monkeypatch):
    monkeypatch.setattr(ts, "run_rung", lambda *a: pytest.fail("ran past --max-minutes"))
    rungs = ts.plan(["net"], ["xgb"], [0], [128])
    assert ts.run_ladder(rungs, str(tmp_path), str(tmp_path), PLATFORM, [], "c", -1) == 0


def _pts(pairs: dict[int, tuple[float | None, float]]) -> dict[int, dict]:
    return {b: {"latency_ms": ms, "cumulative_tuning_seconds": s} for b, (ms, s) in pairs.items()}


def test_time_fraction_is_the_first_default_rung_at_or_below_xgbs_2048_latency():
    xgb = _pts({128: (10.0, 100), 2048: (5.0, 1000)})
    got = tsp.seed_time(xgb, _pts({128: (6.0, 50), 256: (5.0, 120), 2048: (4.0, 900)}))
    assert got["status"] == "reached" and got["default_budget"] == 256
    assert got["time_fraction"] == pytest.approx(0.12)
    never = tsp.seed_time(xgb, _pts({128: (6.0, 50), 2048: (5.5, 900)}))
    assert never["status"] == "not reached" and never["time_fraction"] is None
    assert "xgb's 2048-trial latency 5.00 ms is not reached by the default's 2048 rung " \
           "(5.50 ms)" in never["reason"]
    pending = tsp.seed_time(xgb, _pts({128: (6.0, 50)}))
    assert pending["status"] == "missing" and "reach only 128 trials" in pending["reason"]
    no_xgb = tsp.seed_time(_pts({128: (10.0, 100)}), _pts({2048: (1.0, 5)}))
    assert no_xgb["status"] == "missing"
    assert no_xgb["reason"] == "not measured yet: the 2048 rung of xgb is missing"
    untimed = tsp.seed_time(_pts({2048: (None, 100)}), {})
    assert untimed["reason"] == "not measured yet: the 2048 rung of xgb is not timed yet"


def test_network_result_takes_medians_over_the_seeds_with_data():
    xgb = {s: _pts({128: (10.0, 100), 2048: (5.0, 1000)}) for s in (0, 1, 2)}
    default = {0: _pts({128: (8.0, 50), 512: (5.0, 200)}),        # 0.2, ratio 0.8
               1: _pts({128: (9.0, 50), 1024: (4.9, 400)}),       # 0.4, ratio 0.9
               2: _pts({128: (7.0, 50), 2048: (6.0, 900)})}       # never, ratio 0.7
    got = tsp.network_result({"xgb": xgb, "default": default})
    assert got["time_fraction"] == pytest.approx(0.4)  # median of 0.2, 0.4, inf
    assert got["default_budget_ratio"] == pytest.approx(0.8)
    assert got["seeds"] == [0, 1, 2] and got["time_status"] == "reached"
    # two of three never reach it: the median is "not reached", null
    default[1] = _pts({128: (9.0, 50), 2048: (5.1, 900)})
    got = tsp.network_result({"xgb": xgb, "default": default})
    assert got["time_fraction"] is None and got["time_status"] == "not reached"
    # seeds without the data are left out, and said
    got = tsp.network_result({"xgb": {0: xgb[0], 1: _pts({128: (10.0, 1)})},
                              "default": {0: default[0], 1: _pts({256: (1.0, 1)})}})
    assert got["time_fraction_seeds"] == [0] and got["default_budget_ratio_seeds"] == [0]
    assert got["seeds"] == [0] and got["time_fraction"] == pytest.approx(0.2)
    assert got["per_seed"][1]["ratio_reason"] == \
        "not measured yet: the default's 128 rung is missing or not timed yet"
    empty = tsp.network_result({})
    assert empty["time_fraction"] is None and empty["default_budget_ratio"] is None
    assert empty["seeds"] == [] and empty["time_status"] == "missing"
    assert not math.isinf(got["default_budget_ratio"])


def _write_records(runs: str, network: str) -> None:
    """xgb and the default, seed 0, rungs 128 and 2048, and their timing."""
    lat = {"torch": 20.0}
    for preset, rungs in (("xgb", [(128, 100, 10.0), (2048, 1000, 5.0)]),
                          ("default", [(128, 60, 4.8), (2048, 700, 4.6)])):
        entries = []
        cum = 0
        for budget, seconds, ms in rungs:
            cum += seconds
            entries.append({"budget": budget, "trials_total": budget,
                            "tuning_seconds": seconds, "cumulative_tuning_seconds": cum,
                            "predict_seconds": 1, "untimed_trials": 0, "check_error": 1e-6,
                            "preset_name": preset, "artifact": f"/nowhere/{preset}{budget}",
                            "target": PROV["target"], "machine": MACHINE,
                            "runtime": PROV["runtime"], "code": "abcdef1234567",
                            "date": MACHINE["date"]})
            lat[rec.artifact_key(preset, 0, budget)] = ms
        path = rec.record_path(runs, PLATFORM, network, preset, 0)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        json.dump({"network": network, "preset": preset, "seed": 0, "rungs": entries},
                  open(path, "w", encoding="utf-8"))
    json.dump({"network": network, "latency_ms": lat, "artifacts": {}, "machine": MACHINE,
               "runtime": PROV["runtime"], "target": PROV["target"], "date": MACHINE["date"],
               "timing": {"windows": 10, "min_window_ms": 200, "rounds": 5}},
              open(rec.timing_path(runs, PLATFORM, network), "w", encoding="utf-8"))


def test_page_and_json_from_records(tmp_path):
    runs = str(tmp_path / "runs")
    _write_records(runs, "resnet-18")
    out = str(tmp_path / "tuning-speed")
    doc = tsp.write_page(runs, out, PROV, ["resnet-18", "torchvision.models:regnet_y_400mf"],
                         PLATFORM)
    saved = json.load(open(out + ".json", encoding="utf-8"))
    assert saved["networks"] == json.loads(json.dumps(doc["networks"]))
    net = saved["networks"]["resnet-18"]
    assert {"time_fraction", "default_budget_ratio", "seeds", "per_seed", "rungs"} <= set(net)
    assert net["time_fraction"] == pytest.approx(60 / 1100)  # reached at 128 trials
    assert net["default_budget_ratio"] == pytest.approx(0.48) and net["seeds"] == [0]
    assert saved["goal"] == {"time_fraction": 0.25, "time_fraction_moonshot": 0.10,
                             "default_budget_ratio": 0.85}
    held_out = saved["networks"]["torchvision.models:regnet_y_400mf"]
    assert held_out["time_fraction"] is None and held_out["seeds"] == []
    text = open(out + ".md", encoding="utf-8").read()
    assert text.startswith(tsp.TITLE + "\n\n" + tsp.NETWORKS_PARAGRAPH + "\n")
    assert "`python -m bench.tuning_speed --budgets 128`" in text
    assert "| resnet-18 | 0 | 0.05 (moonshot) | reached | 0.48 | reached |" in text
    assert "| torchvision.models:regnet_y_400mf | - | - | not measured | - | not measured |" \
        in text
    assert "| 2048 | 0 | 2048 | 1100 | 5.00 | 0.25x | 2048 | 760 | 4.60 | 0.23x |" in text
    assert "- **torchvision.models:regnet_y_400mf**:" in text
    assert "not measured yet: no rung of this network exists." in text
    assert "`test`: Test CPU (flags: avx2)" in text and "  - `abcdef123456`: 4 runs" in text
    assert "No rung yet." in text
    assert "## Notes on these runs" not in text  # none written


def test_the_records_notes_show_on_the_page(tmp_path):
    runs = str(tmp_path / "runs")
    _write_records(runs, "resnet-18")
    with open(os.path.join(runs, PLATFORM, tsp.NOTES_FILE), "w", encoding="utf-8") as f:
        f.write("- the machine was loaded\n")
    out = str(tmp_path / "tuning-speed")
    tsp.write_page(runs, out, PROV, ["resnet-18"], PLATFORM)
    text = open(out + ".md", encoding="utf-8").read()
    assert "## Notes on these runs\n\n- the machine was loaded\n\n## Provenance" in text


def test_stub_paragraph_is_kept_verbatim():
    """The page's paragraph naming the networks is the one written before measuring."""
    path = os.path.join(ts.REPO, "docs", "bench", "tuning-speed.md")
    assert tsp.NETWORKS_PARAGRAPH in open(path, encoding="utf-8").read()
    assert all(n.split(":")[-1] in tsp.NETWORKS_PARAGRAPH for n in ts.NETWORKS)


def test_timing_is_redone_only_when_the_set_of_builds_changed(tmp_path, monkeypatch):
    runs = str(tmp_path / "runs")
    art = tmp_path / "art"
    art.mkdir()
    (art / "manifest.json").write_text(json.dumps({"provenance": {"date": "d1"}}))
    path = rec.record_path(runs, PLATFORM, "net", "xgb", 0)
    os.makedirs(os.path.dirname(path))
    json.dump({"network": "net", "preset": "xgb", "seed": 0,
               "rungs": [{"budget": 128, "artifact": str(art)}]}, open(path, "w"))
    timed = []
    monkeypatch.setattr(tst, "time_network", lambda n, arts, t, c: timed.append(arts) or {
        "artifacts": arts})
    assert tst.time_networks(["net", "other"], runs, PLATFORM, {}, "c") == ["net"]
    assert list(timed[0]) == ["xgb/s0/128"]
    assert tst.time_networks(["net"], runs, PLATFORM, {}, "c") == []
    assert tst.time_networks(["net"], runs, PLATFORM, {}, "c", force=True) == ["net"]
    (art / "manifest.json").write_text(json.dumps({"provenance": {"date": "d2"}}))
    assert tst.time_networks(["net"], runs, PLATFORM, {}, "c") == ["net"]


@pytest.mark.slow
def test_smoke_alexnet_16_trials_then_timed(tmp_path):
    """The whole path once: a 16-trial rung of alexnet, its export, the timing, the page."""
    runs, out = str(tmp_path / "runs"), str(tmp_path / "page")
    assert ts.main(["--networks", "alexnet", "--presets", "xgb", "--seeds", "0", "--budgets",
                    "16", "--runs-dir", runs, "--out", out, "--work-root",
                    str(tmp_path / "work"), "--windows", "2", "--rounds", "1",
                    "--min-window-ms", "20", "runner.min_repeat_ms=10"]) == 0
    platform = os.listdir(runs)[0]
    timing = rec.read_json(rec.timing_path(runs, platform, "alexnet"))
    assert set(timing["latency_ms"]) == {"xgb/s0/16", "torch"}
    assert timing["rel_error"]["xgb/s0/16"] < 1e-3
    doc = json.load(open(out + ".json", encoding="utf-8"))
    assert doc["networks"]["alexnet"]["rungs"][0]["latency_ms"] > 0
