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
    assert ts.tune_args(ts.Rung("n", "xgb", 1, 128), ["x=1"], "w") == [
        "seed=1", "preset=xgb", "x=1", "--no-memory"]
    assert ts.tune_args(ts.Rung("n", "default", 0, 128), [], "w") == ["seed=0", "--no-memory"]


def test_first_run_tunes_as_the_default_with_an_empty_memory_of_its_own():
    assert ts.FIRST_RUN == "first-run" and ts.FIRST_RUN not in ts.PRESETS  # opt-in only
    work = ts.work_dir(os.path.join("w", "root"), ts.Rung("mobilenet-v2", "first-run", 1, 128))
    assert work == os.path.join("w", "root", "mobilenet-v2-first-run-s1")
    args = ts.tune_args(ts.Rung("mobilenet-v2", "first-run", 1, 256), ["x=1"], work)
    assert args == ["seed=1", "x=1", f"memory.path={os.path.join(work, 'memory')}"]
    # the default's arguments but for the memory: no preset, no --no-memory
    default = ts.tune_args(ts.Rung("mobilenet-v2", "default", 1, 256), ["x=1"], work)
    assert [a for a in default if a not in ts.TUNE_ARGS] == args[:-1]


class _Help:
    stdout = "usage: tune.py [--repair-db] [--no-memory]\n  --no-memory  neither read ..."


def _as_tune_py_reads(arg_lists):
    """:func:`bench.tuning_speed._memory_of` without a process: ``--no-memory`` or
    ``memory.enabled=false`` turn it off, the last ``memory.path`` names it (the real one
    is checked against tune.py in :func:`test_memory_settings_as_tune_py_reads_them`)."""
    out = []
    for args in arg_lists:
        if any(a.startswith("x=") for a in args):
            raise SystemExit(f"tune.py refuses the benchmark's arguments: {args}")
        paths = [a.split("=", 1)[1] for a in args if a.startswith("memory.path=")]
        out.append(("--no-memory" not in args and "memory.enabled=false" not in args,
                    os.path.abspath(paths[-1]) if paths else None))
    return out


@pytest.fixture
def fake_tune_py(monkeypatch):
    monkeypatch.setattr(ts.subprocess, "run", lambda *a, **k: _Help)
    monkeypatch.setattr(ts, "_memory_of", _as_tune_py_reads)


def test_memory_settings_as_tune_py_reads_them():
    """One process of tune.py's own argument and configuration reading: xgb and the
    default tune without the memory, first-run with its work dir's own."""
    work = os.path.join(ts.REPO, "work", "w")
    got = ts._memory_of([ts.tune_args(ts.Rung("n", p, 0, 1), [], work)
                         for p in ("xgb", "default", "first-run")])
    assert got == [(False, None), (False, None), (True, os.path.join(work, "memory"))]
    with pytest.raises(SystemExit, match="tune.py refuses .*Key 'nokey'"):
        ts._memory_of([["seed=0", "nokey=1"]])


def test_tune_args_are_checked_against_tune_py(fake_tune_py, monkeypatch):
    ts.check_tune_args()  # the real TUNE_ARGS pass it
    ts.check_tune_args(["xgb", "default", "first-run"], ["runner.number=5"])
    with pytest.raises(SystemExit, match="tune.py refuses"):
        ts.check_tune_args(["xgb"], ["x=1"])  # before anything is tuned
    monkeypatch.setattr(ts, "TUNE_ARGS", ())
    with pytest.raises(SystemExit, match="add it to TUNE_ARGS"):
        ts.check_tune_args()
    ts.check_tune_args(["first-run"])  # takes none of TUNE_ARGS
    monkeypatch.setattr(ts, "TUNE_ARGS", ("--no-memory", "--gone"))
    with pytest.raises(SystemExit, match="does not take --gone"):
        ts.check_tune_args()
    # as tune.py reads them: xgb's and the default's arguments leave the memory off
    monkeypatch.setattr(ts, "TUNE_ARGS", ())
    monkeypatch.setattr(ts, "REQUIRED_WHEN_OFFERED", ())
    with pytest.raises(SystemExit, match="preset default: .* tunes with the memory on at "
                       ".*a benchmark run must not use the tuning memory"):
        ts.check_tune_args(["default"])


def test_first_run_is_refused_any_memory_but_its_work_dirs_own(fake_tune_py, monkeypatch):
    for override in ("memory.path=/home/u/.cache/metatune/memory", "memory.enabled=false"):
        with pytest.raises(SystemExit, match="leave it out"):
            ts.check_tune_args(["first-run"], [override])
        with pytest.raises(SystemExit, match="leave it out"):
            ts.check_tune_args(["xgb"], [override])
    ts.check_tune_args(["first-run"], ["memory.transfer=true"])  # other keys pass
    real = ts.tune_args
    for wrong in (lambda r, o, w: real(r, o, w)[:-1],  # the machine's memory
                  lambda r, o, w: [*real(r, o, w)[:-1], "memory.path=/shared/memory"],
                  lambda r, o, w: [*real(r, o, w), "--no-memory"]):  # no memory at all
        monkeypatch.setattr(ts, "tune_args", wrong)
        with pytest.raises(SystemExit, match="preset first-run must tune with the memory on"):
            ts.check_tune_args(["first-run"])


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


def test_first_run_rungs_tune_with_their_own_memory_and_record_it(tmp_path, monkeypatch):
    seen = []

    def tune(network, budget, work, extra):
        seen.append((work, extra))
        return {**_report(budget, 128, 8.0), "preset": "meta-BO-T", "memory": {
            "dir": os.path.join(work, "memory", "llvm-test"), "known": 0,
            "transfer": "schedule transfer: 8 candidates for 1 of 2 tasks"}}

    def export(work, budget):
        out = ts.artifact_dir(work, budget)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump({}, f)
        return out, {}, 0.5

    monkeypatch.setattr("bench.runtimes.tune_work_dir", tune)
    monkeypatch.setattr(ts, "export_rung", export)
    runs, work = str(tmp_path / "runs"), str(tmp_path / "work")
    rungs = ts.plan(["net", "other"], ["first-run"], [0], [128, 256])
    assert ts.run_ladder(rungs, work, runs, PLATFORM, ["x=1"], "cmd", None) == 4
    for w, extra in seen:
        assert "--no-memory" not in extra and "x=1" in extra
        assert [a for a in extra if a.startswith("memory.")] == [
            f"memory.path={os.path.join(w, 'memory')}"]
    assert {w for w, _ in seen} == {os.path.join(work, "net-first-run-s0"),
                                    os.path.join(work, "other-first-run-s0")}
    record = rec.read_json(rec.record_path(runs, PLATFORM, "net", "first-run", 0))
    assert record["preset"] == "first-run" and len(record["rungs"]) == 2
    assert record["rungs"][0]["memory"]["transfer"].startswith("schedule transfer")


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


def _write_records(runs: str, network: str, first_run: bool = False) -> None:
    """xgb and the default, seed 0, rungs 128 and 2048, and their timing; with
    ``first_run``, first-run's rungs 128 and 256 too."""
    lat = {"torch": 20.0}
    presets = [("xgb", [(128, 100, 10.0), (2048, 1000, 5.0)]),
               ("default", [(128, 60, 4.8), (2048, 700, 4.6)])]
    if first_run:
        presets.append(("first-run", [(128, 55, 4.0), (256, 90, 3.9)]))
    for preset, rungs in presets:
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


def test_first_run_on_the_page_and_json_when_its_records_exist(tmp_path):
    runs = str(tmp_path / "runs")
    _write_records(runs, "resnet-18", first_run=True)
    _write_records(runs, "mobilenet-v2")
    out = str(tmp_path / "tuning-speed")
    tsp.write_page(runs, out, PROV, ["resnet-18", "mobilenet-v2"], PLATFORM)
    saved = json.load(open(out + ".json", encoding="utf-8"))["networks"]
    net = saved["resnet-18"]
    assert net["first_run_budget_ratio"] == pytest.approx(4.0 / 4.8)
    assert net["first_run_budget_ratio_seeds"] == [0]
    assert net["first_run_per_seed"][0]["reason"] == \
        "first-run's 4.00 ms is 0.83x the default's 4.80 ms at 128 trials"
    assert net["default_budget_ratio"] == pytest.approx(0.48)  # the existing keys unchanged
    assert saved["mobilenet-v2"]["first_run_budget_ratio"] is None
    assert saved["mobilenet-v2"]["first_run_per_seed"] == []
    text = open(out + ".md", encoding="utf-8").read()
    assert "default, first run: memory on, empty; schedule transfer from the shipped " \
           "datasets" in text
    assert "| default / xgb latency at 128 trials | <= 0.85 | first run / default latency " \
           "at 128 trials |\n|---|---|---|---|---|---|---|" in text
    assert "| resnet-18 | 0 | 0.05 (moonshot) | reached | 0.48 | reached | 0.83 |" in text
    assert "| mobilenet-v2 | 0 | 0.05 (moonshot) | reached | 0.48 | reached | - |" in text
    # resnet-18's rung table has first-run's columns: tuning s, ms, / xgb
    assert "default: / eager | first run: tuning s (cumulative) | first run: ms | " \
           "first run: / xgb |\n|" + "---|" * 13 in text
    assert "| 128 | 0 | 128 | 100 | 10.0 | 0.50x | 128 | 60 | 4.80 | 0.24x | 55 | 4.00 | " \
           "0.40x |" in text
    assert "| 256 | 0 | - | - | - | - | - | - | - | - | 145 | 3.90 | - |" in text
    assert "| 2048 | 0 | 2048 | 1100 | 5.00 | 0.25x | 2048 | 760 | 4.60 | 0.23x | - | - | - |" \
        in text
    # mobilenet-v2's has none
    assert "| 2048 | 0 | 2048 | 1100 | 5.00 | 0.25x | 2048 | 760 | 4.60 | 0.23x |\n" in text
    assert "- first run: the default's arguments with `memory.path=<work dir>/memory`" in text


def test_a_network_with_first_run_rungs_alone(tmp_path):
    runs = str(tmp_path / "runs")
    _write_records(runs, "resnet-18", first_run=True)
    for preset in ("xgb", "default"):
        os.remove(rec.record_path(runs, PLATFORM, "resnet-18", preset, 0))
    out = str(tmp_path / "tuning-speed")
    doc = tsp.write_page(runs, out, PROV, ["resnet-18"], PLATFORM)
    net = doc["networks"]["resnet-18"]
    assert net["first_run_budget_ratio"] is None and net["seeds"] == []
    assert net["first_run_per_seed"][0]["reason"] == \
        "not measured yet: the default's 128 rung is missing or not timed yet"
    text = open(out + ".md", encoding="utf-8").read()
    assert "not measured yet: no rung of xgb or the default exists (only first-run's)." in text
    assert "| 128 | 0 | - | - | - | - | - | - | - | - | 55 | 4.00 | - |" in text


def test_without_first_run_records_the_page_has_no_trace_of_it(tmp_path):
    runs = str(tmp_path / "runs")
    _write_records(runs, "resnet-18")
    out = str(tmp_path / "tuning-speed")
    tsp.write_page(runs, out, PROV, ["resnet-18"], PLATFORM)
    text = open(out + ".md", encoding="utf-8").read()
    assert "first run:" not in text and "memory on, empty" not in text


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
    # first-run's builds join the network's side-by-side timing (and change its set)
    first = tmp_path / "first"
    first.mkdir()
    (first / "manifest.json").write_text(json.dumps({"provenance": {"date": "d3"}}))
    json.dump({"network": "net", "preset": "first-run", "seed": 0,
               "rungs": [{"budget": 128, "artifact": str(first)}]},
              open(rec.record_path(runs, PLATFORM, "net", "first-run", 0), "w"))
    assert tst.time_networks(["net"], runs, PLATFORM, {}, "c") == ["net"]
    assert list(timed[-1]) == ["first-run/s0/128", "xgb/s0/128"]
    assert timed[-1]["first-run/s0/128"]["preset"] == "first-run"


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


def test_the_committed_records_still_make_the_committed_page(tmp_path):
    """The page in docs/bench comes back, byte for byte, from the records beside it."""
    saved = json.load(open(os.path.join(ts.REPO, ts.OUT + ".json"), encoding="utf-8"))
    prov = {k: saved[k] for k in ("command", "date", "machine", "target", "runtime")}
    out = str(tmp_path / "page")
    tsp.write_page(os.path.join(ts.REPO, saved["runs_dir"]), out, prov,
                   list(saved["networks"]), saved["platform"])
    assert open(out + ".md", encoding="utf-8").read() == open(
        os.path.join(ts.REPO, ts.OUT + ".md"), encoding="utf-8").read()
