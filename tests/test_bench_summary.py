"""The framework comparison (``bench.compare_frameworks``): curves on a common grid, trials
to xgb's best, its run plan and its page; and ``bench.common``'s shared writers."""

from __future__ import annotations

import os

import pytest

from bench.common import REPO
from bench.frameworks import page, plan, stats


def _run(preset, seed, curve, rounds=None):
    return {"task": "net/t", "preset": preset, "seed": seed, "best_ms": curve[-1][1],
            "curve": curve, "rounds": rounds or [{"mse": 0.1, "mse_d": 0.2, "pairwise": 0.6}],
            "tuning_seconds": 10.0}


def test_trials_to_reach_and_best_at():
    curve = [[16, 5.0], [32, 3.0], [48, 2.0]]
    assert stats.trials_to_reach(curve, 3.0) == 32 and stats.trials_to_reach(curve, 1.0) is None
    assert stats.best_at(curve, 40) == 3.0 and stats.best_at(curve, 8) is None


def test_summarize_compares_with_xgb():
    runs = [_run("xgb", 0, [[16, 4.0], [32, 3.0]]), _run("xgb", 1, [[16, 5.0], [32, 3.0]]),
            _run("meta-BO-T", 0, [[16, 3.0], [32, 2.4]]),
            _run("meta-BO-T", 1, [[16, 2.9], [32, 2.0]])]
    s = stats.summarize(runs, ["xgb", "meta-BO-T"], 32, 16)["net/t"]
    assert s["xgb"]["final_over_xgb"] == 1.0
    assert s["meta-BO-T"]["final_over_xgb"] == pytest.approx(2.2 / 3.0)  # per-seed ratios
    assert s["meta-BO-T"]["trials_to_xgb_best"] == [16, 16]
    assert s["meta-BO-T"]["curve_median_ms"] == [2.95, 2.2]
    summary = {"net/t": s}
    overall = stats.overall(summary, ["xgb", "meta-BO-T"])
    assert overall["meta-BO-T"]["tasks_better"] == 1
    assert overall["meta-BO-T"]["median_trials_to_xgb_best"] == 16
    # the median of each seed's first-round ratio: 3.0 / 4.0 and 2.9 / 5.0
    assert overall["meta-BO-T"]["first_round_geomean_over_xgb"] == pytest.approx(
        (3.0 / 4.0 + 2.9 / 5.0) / 2)
    assert overall["xgb"]["geomean_over_xgb"] == 1.0
    early = stats.early_accuracy(summary, ["xgb", "meta-BO-T"])
    assert early["xgb"]["mse"][0] == 0.1 and early["xgb"]["mse"][1] is None
    text = page.markdown({"command": "c", "date": "d", "machine": "m", "trials": 32, "batch": 16,
                        "seeds": [0, 1], "summary": summary, "png": {"net/t": "x.png"},
                        "overall": overall, "early_accuracy": early, "png_accuracy": "a.png"})
    assert "meta-BO-T" in text and "## All tasks" in text and "| xgb | MSE | 0.100 | - |" in text


def test_overall_counts_runs_that_never_reach_xgb():
    runs = [_run("xgb", 0, [[16, 3.0], [32, 2.0]]), _run("xgb", 1, [[16, 3.0], [32, 2.0]]),
            _run("mlp", 0, [[16, 4.0], [32, 3.0]]), _run("mlp", 1, [[16, 1.0], [32, 1.0]])]
    overall = stats.overall(stats.summarize(runs, ["xgb", "mlp"], 32, 16), ["xgb", "mlp"])
    assert overall["mlp"]["runs_reaching_xgb_best"] == 1 and overall["mlp"]["runs"] == 2
    assert overall["mlp"]["median_trials_to_xgb_best"] is None  # median of 16 and never


def test_write_results_round_trips_json_with_rows_one_per_line(tmp_path, capsys):
    import json

    from bench.common import write_results

    doc = {"command": "c", "summary": {"a": 1.5}, "rows": [["m", 0, 0.25], ["m", 8, 0.5]]}
    write_results(str(tmp_path / "r.json"), str(tmp_path / "r.md"), doc, "# page\n",
                  rows_key="rows")
    text = (tmp_path / "r.json").read_text()
    assert json.loads(text) == doc and '  ["m", 8, 0.5]' in text.splitlines()
    assert (tmp_path / "r.md").read_text() == "# page\n" and "# page" in capsys.readouterr().out
    write_results(str(tmp_path / "s.json"), str(tmp_path / "s.md"), {"rows": []}, "", "rows")
    assert json.loads((tmp_path / "s.json").read_text()) == {"rows": []}


def test_network_reports_are_copied_to_the_runs_dir_and_read_back(tmp_path):
    import argparse
    import json

    report = {"network": "alexnet", "preset": "xgb", "trials_total": 8, "tuning_seconds": 60.0,
              "latency_ms": {"tuned": 30.0, "untuned": 900.0, "torch": 15.0}}
    work = tmp_path / "work" / "net-alexnet-xgb-t8"
    work.mkdir(parents=True)
    (work / "report.json").write_text(json.dumps(report))
    unfinished = tmp_path / "work" / "net-alexnet-meta-BO-t8"
    unfinished.mkdir()
    (unfinished / "report.json").write_text(json.dumps({"latency_ms": {"tuned": None}}))
    args = argparse.Namespace(networks=["alexnet"], presets=["xgb", "meta-BO"], network_trials=8,
                              runs_dir=str(tmp_path / "runs"), work_root=str(tmp_path / "work"),
                              report_only=True, network_seeds=[0], overrides=[])
    assert plan.tune_networks(args) == [report]  # the unfinished run is left out, not run
    assert json.loads((tmp_path / "runs" / "net-alexnet-xgb-t8.json").read_text()) == report
    (work / "report.json").unlink()
    assert plan.tune_networks(args) == [report]  # read back from the runs dir
    row = stats.network_rows([report])[0]
    assert row["speedup_over_untuned"] == 30.0 and row["tuning_minutes"] == 1.0
    row = stats.network_rows([dict(report, tasks=[{"best_ms": 1.0}, {"best_ms": None}])])[0]
    assert row["tasks"] == 2 and row["tasks_measured"] == 1


def test_network_seeds_have_their_own_records_and_rows_take_medians(tmp_path):
    import argparse
    import json

    def report(seed, tuned):
        return {"network": "alexnet", "preset": "xgb", "trials_total": 8, "config": {
            "seed": seed, "trials_per_round": 8}, "tuning_seconds": 60.0 * (seed + 1),
            "latency_ms": {"tuned": tuned, "untuned": 900.0, "torch": 15.0},
            "tasks": [{"best_ms": 1.0}, {"best_ms": None}]}

    runs = tmp_path / "runs"
    runs.mkdir()
    assert plan.network_run_name("alexnet", "xgb", "t8", 0) == "net-alexnet-xgb-t8"
    assert plan.network_run_name("alexnet", "xgb", "r3", 1) == "net-alexnet-xgb-r3-s1"
    assert plan.network_budget(argparse.Namespace(network_trials=8, network_rounds=3)) == (
        "3 rounds per task", ["--rounds-per-task", "3"], "r3")
    assert plan.network_budget(argparse.Namespace(network_trials=8)).label == "t8"
    for seed, tuned in ((0, 30.0), (1, 20.0), (2, 45.0)):
        name = plan.network_run_name("alexnet", "xgb", "t8", seed)
        (runs / f"{name}.json").write_text(json.dumps(report(seed, tuned)))
    args = argparse.Namespace(networks=["alexnet"], presets=["xgb"], network_trials=8,
                              runs_dir=str(runs), work_root=str(tmp_path / "work"),
                              report_only=True, network_seeds=[0, 1, 2, 3], overrides=[])
    reports = plan.tune_networks(args)
    assert [r["config"]["seed"] for r in reports] == [0, 1, 2]  # seed 3 not run yet
    (row,) = stats.network_rows(reports)
    assert row["seeds"] == [0, 1, 2] and row["tuned_ms_per_seed"] == [30.0, 20.0, 45.0]
    assert row["tuned_ms"] == 30.0 and row["speedup_over_untuned"] == 30.0
    assert row["tuning_minutes"] == 2.0 and row["tasks_measured"] == 1
    assert row["over_eager_by_seed"] == {0: 2.0, 1: 20.0 / 15.0, 2: 3.0}
    # with timing windows, the median of each tuned window over the eager one beside it
    windows = {"tuned": [10.0, 12.0, 30.0], "torch": [20.0, 20.0, 20.0]}
    assert stats.over_eager(dict(report(0, 30.0), latency_windows_ms=windows)) == 0.6
    assert "about 1.0 rounds per measured task" in page._rounds_note([row])


def test_time_curve_accumulates_round_seconds_and_reaches_xgb_best():
    rounds = [{"trial": 16, "search_s": 1.0, "measure_s": 4.0, "update_s": 1.0},
              {"trial": 32, "search_s": 1.0, "measure_s": 3.0, "update_s": 0.0}]
    fast = _run("meta-BO-T", 0, [[16, 3.5], [32, 2.0]], rounds)
    assert stats.time_curve(fast) == [[6.0, 3.5], [10.0, 2.0]]
    slow = _run("xgb", 0, [[16, 4.0], [32, 3.0]], [dict(r, measure_s=20.0) for r in rounds])
    s = stats.summarize([slow, fast], ["xgb", "meta-BO-T"], 32, 16)["net/t"]
    assert s["meta-BO-T"]["seconds_to_xgb_best"] == [10.0]
    assert s["xgb"]["seconds_to_xgb_best"] == [43.0]  # 22 + 21 s
    assert stats.overall({"net/t": s}, ["xgb", "meta-BO-T"])["meta-BO-T"][
        "median_seconds_to_xgb_best"] == 10.0


def test_equal_time_compares_every_framework_at_the_fastest_runs_tuning_time():
    rounds = [{"trial": 16, "search_s": 1.0, "measure_s": 4.0},
              {"trial": 32, "search_s": 1.0, "measure_s": 4.0}]
    fast = _run("meta-BO-T", 0, [[16, 3.0], [32, 2.5]], rounds)  # done after 10 s
    slow = _run("xgb", 0, [[16, 4.0], [32, 2.0]],
                [dict(r, measure_s=9.0) for r in rounds])  # 10 s, then 20 s
    assert stats.equal_time_budgets([fast, slow]) == {0: 10.0}
    s = stats.summarize([slow, fast], ["xgb", "meta-BO-T"], 32, 16)["net/t"]
    assert s["xgb"]["equal_time_ms"] == [4.0] and s["meta-BO-T"]["equal_time_ms"] == [2.5]
    assert s["meta-BO-T"]["equal_time_over_xgb"] == 2.5 / 4.0
    assert s["meta-BO-T"]["final_over_xgb"] == 2.5 / 2.0
    o = stats.overall({"net/t": s}, ["xgb", "meta-BO-T"])["meta-BO-T"]
    assert o["equal_time_geomean_over_xgb"] == 2.5 / 4.0 and o["geomean_over_xgb"] == 1.25
    doc = {"presets": ["xgb", "meta-BO-T"], "summary": {"net/t": s}}
    assert page.losses(doc) == ["- net/t, final best: meta-BO-T is behind xgb (1.250x its "
                              "latency)"]
    # seed 1 has only xgb's run (the seed under way): no equal-time budget for it yet
    assert stats.equal_time_budgets([fast, slow, dict(slow, seed=1)]) == {0: 10.0}
    # a record without round timings counts for no budget
    untimed = dict(fast, rounds=[{"trial": 16, "measure_s": None}])
    assert stats.equal_time_budgets([untimed, slow]) == {}
    win = _run("meta-BO-T", 0, [[16, 3.0], [32, 1.5]], rounds)
    doc["summary"] = stats.summarize([slow, win], ["xgb", "meta-BO-T"], 32, 16)
    assert page.losses(doc)[0].startswith("- nowhere")


def test_losses_and_pytorch_bullets_for_networks():
    def row(preset, tuned, torch, compiled=None):
        return {"network": "alexnet", "preset": preset, "tuned_ms": tuned, "torch_ms": torch,
                "torch_compile_ms": compiled}

    rows = [row("xgb", 40.0, 15.0, 14.0), row("xgb-Xfer", 30.0, 17.0, 14.0),
            row("meta-BO-T", 33.0, 16.0, 14.0)]
    doc = {"presets": ["xgb", "xgb-Xfer", "meta-BO-T"], "summary": {}, "networks": rows}
    assert page.losses(doc) == ["- alexnet end to end: meta-BO-T 33.00 ms is behind xgb-Xfer "
                              "30.00 ms (1.100x)"]
    assert page.versus_pytorch(rows) == ["- alexnet: the fastest TVM build (xgb-Xfer, 30.00 ms) "
                                       "takes 1.88x PyTorch eager's (16.00 ms) and 2.14x "
                                       "torch.compile's (14.00 ms)"]
    rows[0]["over_eager"], rows[2]["over_eager"] = 0.6, 0.75
    rows[0]["torch_compile_over_eager"] = 0.8
    assert page.versus_pytorch(rows) == [
        "- alexnet: the fastest TVM build relative to eager (xgb, 40.00 ms in its run) takes "
        "0.60x the latency of PyTorch eager timed beside it; torch.compile took 0.80x "
        "eager's beside it, so the build takes 0.75x torch.compile's"]
    assert page.losses(doc)[1] == ("- alexnet end to end, over PyTorch eager timed beside each "
                                   "build: meta-BO-T 0.750x eager is behind xgb 0.600x eager "
                                   "(1.250x)")
    assert page.losses({"presets": ["meta-BO-T"], "summary": {}, "networks": rows}) == [
        "- nothing to compare yet"]


def test_headlines_set_the_papers_claims_beside_ours():
    runs = [_run(p, 0, [[16, ms]]) for p, ms in (("xgb", 2.0), ("RL", 2.2), ("meta-BO-T", 1.6),
                                                  ("meta-RL", 2.0))]
    summary = stats.summarize(runs, ["xgb", "RL", "meta-BO-T", "meta-RL"], 16, 16)
    nets = [{"network": "a", "preset": "xgb", "tuned_ms_by_seed": {0: 10.0},
             "over_eager_by_seed": {0: 0.5}},
            {"network": "a", "preset": "meta-BO-T", "tuned_ms_by_seed": {0: 8.0},
             "over_eager_by_seed": {0: 0.625}},  # faster, but timed on a faster machine
            {"network": "b", "preset": "xgb", "tuned_ms_by_seed": {0: 10.0, 1: 20.0}},
            {"network": "b", "preset": "meta-BO-T", "tuned_ms_by_seed": {0: 12.5, 1: 25.0}}]
    timed = [{"network": "a", "seed": 0, "latency_ms": {"xgb": 10.0, "meta-BO-T": 9.0}},
             {"network": "a", "seed": 1, "latency_ms": {"xgb": 10.0, "meta-BO-T": 11.0}},
             {"network": "b", "seed": 0, "latency_ms": {"xgb": 10.0}}]  # no meta-BO-T build
    rows = {(h["preset"], h["against"]): h for h in stats.headlines(summary, nets, timed)}
    bo_xgb = rows[("meta-BO-T", "xgb")]
    assert bo_xgb["paper_pct"] == 8.0
    assert bo_xgb["kernels_pct"] == pytest.approx(25.0) and bo_xgb["kernels_faster"] == 1
    # end to end: 1.25x on one network, 0.8x on the other: no gain overall, 1 of 2 faster
    assert bo_xgb["networks_pct"] == pytest.approx(0.0, abs=1e-9)
    assert (bo_xgb["networks_faster"], bo_xgb["networks"]) == (1, 2)
    assert bo_xgb["networks_eager_pct"] == pytest.approx(-20.0)
    assert (bo_xgb["networks_eager_faster"], bo_xgb["networks_eager"]) == (0, 1)
    # side by side: network a's two seeds, 10/9 and 10/11, median 1.010; b has no pair
    assert bo_xgb["networks_side_pct"] == pytest.approx(100 * ((10 / 9 + 10 / 11) / 2 - 1))
    assert (bo_xgb["networks_side_faster"], bo_xgb["networks_side"]) == (1, 1)
    assert rows[("meta-RL", "RL")]["networks_side_pct"] is None
    assert rows[("meta-RL", "RL")]["kernels_pct"] == pytest.approx(10.0)
    assert rows[("meta-RL", "RL")]["networks_pct"] is None  # no network tuned by both
    text = page.markdown({"command": "c", "date": "d", "machine": "m", "trials": 16,
                          "batch": 16, "seeds": [0], "summary": {}, "headlines":
                          list(rows.values())})
    assert ("| meta-BO-T | xgb | +8 % | +0.0 % (1 of 2) | -20.0 % (0 of 1) | "
            "+1.0 % (1 of 1) | +25.0 % (1 of 1) |") in text


def test_each_platform_has_its_own_runs_dir(monkeypatch):
    import argparse

    from bench import compare_frameworks

    monkeypatch.setattr(plan, "this_platform", lambda: "llvm-znver4")

    def args(**kw):
        base = dict(platform=None, runs_dir=None, work_root=None, out=None, quick=False,
                    report_only=False)
        return argparse.Namespace(**{**base, **kw})

    a = args()
    compare_frameworks._place(a)
    assert a.platform == "llvm-znver4"
    assert a.runs_dir == os.path.join(REPO, "docs", "bench", "runs", "frameworks", "llvm-znver4")
    assert a.work_root == os.path.join(REPO, "work", "bench", "frameworks", "llvm-znver4")
    assert a.out == os.path.join(REPO, "docs", "bench", "frameworks-v2")
    a = args(platform="llvm-icelake-server", report_only=True, quick=True)
    compare_frameworks._place(a)  # another machine's page may be written, not measured
    assert a.out.endswith("frameworks-v2-quick")
    assert a.runs_dir.endswith("llvm-icelake-server")
    with pytest.raises(SystemExit, match="this machine is llvm-znver4"):
        compare_frameworks._place(args(platform="llvm-icelake-server"))


def test_machine_lines_name_each_machine_and_warn_when_several():
    from bench.common import machine_lines

    run = {"machine": {"cpu": "AMD EPYC", "cpu_flags": ["avx2", "fma"]},
           "runtime": {"tvm_threads": 2, "torch_threads": 2}, "target": "llvm -mcpu=znver4"}
    assert machine_lines([run, run]) == [
        "- `znver4`: AMD EPYC (flags: avx2,fma); target `llvm -mcpu=znver4`; TVM 2 / PyTorch 2 "
        "threads."]
    lines = machine_lines([run, {"preset": "xgb"}])
    assert lines[1] == "- machine not recorded: 1 records (made before they carried it)"
    other = dict(run, target="llvm -mcpu=icelake-server")
    assert machine_lines([run, other], several="- several")[-1] == "- several"


def test_a_group_finished_on_another_platform_is_read_not_run_again(tmp_path, capsys):
    import argparse
    import json

    sub = "t32-b16"
    own, other = tmp_path / "llvm-znver4" / sub, tmp_path / "llvm-icelake-server" / sub
    own.mkdir(parents=True)
    other.mkdir(parents=True)

    def record(where, preset, seed, best):
        (where / plan.run_name("net/t", preset, seed)).write_text(
            json.dumps(_run(preset, seed, [[16, best]])))

    record(other, "xgb", 0, 2.0)  # seed 0 finished elsewhere
    record(other, "meta-BO-T", 0, 2.0)
    record(own, "xgb", 1, 4.0)  # seed 1 begun here, but finished elsewhere
    record(other, "xgb", 1, 3.0)
    record(other, "meta-BO-T", 1, 1.0)
    args = argparse.Namespace(tasks=["net/t"], presets=["xgb", "meta-BO-T"], seeds=[0, 1],
                              trials=32, batch=16, runs_dir=str(own.parent),
                              pool_dirs=[str(other.parent)],
                              report_only=True, overrides=[])
    runs, planned = plan.run_tasks(args, "unused")
    assert planned == 4
    # both from the other platform, where each group is whole (not the lone run begun here)
    assert [(r["preset"], r["seed"], r["best_ms"]) for r in runs] == [
        ("xgb", 0, 2.0), ("meta-BO-T", 0, 2.0), ("xgb", 1, 3.0), ("meta-BO-T", 1, 1.0)]
    assert "done before on llvm-icelake-server" in capsys.readouterr().out


def test_source_lines_name_what_each_transfer_was_trained_on():
    runs = [dict(_run("meta-BO-T", 0, [[16, 1.0]]), checkpoint="checkpoints/a-super.ckpt"),
            dict(_run("meta-RL-T", 0, [[16, 1.0]]), checkpoint="checkpoints/a-super.ckpt"),
            dict(_run("xgb-Xfer", 0, [[16, 1.0]]), xfer_data="data/a/train"),
            dict(_run("xgb-Xfer", 1, [[16, 1.0]]), xfer_data=["data/a/train", "data/b/t"]),
            _run("xgb", 0, [[16, 1.0]]),
            dict(_run("meta-BO-T", 1, [[16, 1.0]]), checkpoint="checkpoints/b-super.ckpt",
                 ensemble=["checkpoints/b-super-seed1.ckpt"])]
    assert plan.source_lines(runs) == [
        "- `checkpoints/a-super.ckpt`: meta-BO-T, meta-RL-T", "- `data/a/train`: xgb-Xfer",
        "- `data/a/train + data/b/t`: xgb-Xfer",
        "- `checkpoints/b-super.ckpt + checkpoints/b-super-seed1.ckpt`: meta-BO-T"]


def test_code_lines_count_the_runs_of_each_commit():
    sha = "0123456789abcdef0123456789abcdef01234567"
    runs = [dict(_run("xgb", 0, [[16, 1.0]]), code=sha),
            dict(_run("RL", 0, [[16, 1.0]]), code=sha),
            dict(_run("xgb", 1, [[16, 1.0]]), code=sha + "-dirty"),
            _run("RL", 1, [[16, 1.0]])]
    assert plan.code_lines(runs) == ["- `0123456789ab`: 2 runs", "- `0123456789ab-dirty`: 1 run",
                                     "- not recorded: 1 run"]


def test_code_version_names_this_checkout_and_none_outside_git(tmp_path):
    from metatune.provenance import code_version

    here = code_version()
    assert here is None or len(here.split("-")[0]) == 40
    assert code_version(str(tmp_path)) is None


def test_incomplete_groups_are_left_out_and_listed():
    runs = [_run("xgb", 0, [[16, 4.0]]), _run("meta-BO-T", 0, [[16, 3.0]]),
            _run("xgb", 1, [[16, 5.0]])]  # seed 1: xgb alone (the group under way)
    complete, partial = stats.complete_groups(runs, ["xgb", "meta-BO-T"])
    assert [r["seed"] for r in complete] == [0, 0]
    assert partial == ["net/t seed 1 (1 of 2 presets)"]
    overall = stats.overall(stats.summarize(complete, ["xgb", "meta-BO-T"], 16, 16),
                            ["xgb", "meta-BO-T"])
    assert overall["xgb"]["runs"] == 1  # xgb's lone seed-1 run is not counted
    text = page.markdown({"command": "c", "date": "d", "machine": "m", "trials": 16,
                          "batch": 16, "seeds": [0, 1], "summary": {}, "png": {},
                          "overall": {}, "early_accuracy": {}, "partial_groups": partial})
    assert "net/t seed 1 (1 of 2 presets)" in text


def test_incomplete_network_groups_are_left_out_and_listed():
    def report(preset, seed):
        return {"network": "alexnet", "preset": preset, "trials_total": 8,
                "config": {"seed": seed}, "tuning_seconds": 60.0,
                "latency_ms": {"tuned": 30.0, "untuned": 900.0, "torch": 15.0}}

    # seed 0 (no seed in its config) is whole; seed 1 has xgb alone (the group under way)
    reports = [report("xgb", None), report("meta-BO-T", 0), report("xgb", 1)]
    complete, partial = stats.complete_groups(reports, ["xgb", "meta-BO-T"],
                                              stats.network_group)
    assert complete == reports[:2]
    assert partial == ["alexnet seed 1 (1 of 2 presets)"]
    rows = stats.network_rows(complete)
    assert [len(row["tuned_ms_per_seed"]) for row in rows] == [1, 1]  # seed 1 reaches none


def test_a_group_is_read_where_it_is_whole(tmp_path):
    own, other = tmp_path / "own", tmp_path / "other"
    own.mkdir()
    other.mkdir()
    names = ["t-xgb-1.json", "t-RL-1.json"]
    assert plan.group_dir(str(own), [str(other)], names) == str(own)  # a new group: here
    (own / names[0]).write_text("{}")
    assert plan.group_dir(str(own), [str(other)], names) == str(own)  # begun here: here
    for n in names:
        (other / n).write_text("{}")
    # finished on another machine: read there, not the lone run begun here
    assert plan.group_dir(str(own), [str(other)], names) == str(other)
    (own / names[1]).write_text("{}")
    assert plan.group_dir(str(own), [str(other)], names) == str(own)


def test_side_by_side_section_lists_each_build_over_xgb():
    rec = {"network": "alexnet", "seed": 0, "date": "2026-12-03T09:00:00+00:00",
           "target": "llvm -mcpu=x (2 cores)", "runtime": {"tvm_threads": 2, "torch_threads": 2},
           "timing": {"windows": 10, "min_window_ms": 200.0},
           "latency_ms": {"xgb": 10.0, "meta-BO-T": 9.0, "torch": 13.0},
           "runs": {"xgb": {"tuned_ms_in_run": 10.6}, "meta-BO-T": {"tuned_ms_in_run": 11.6}}}
    lines = page.side_by_side_lines([rec])
    assert "| alexnet | 0 | meta-BO-T | 9.00 | 0.900 | 11.60 |" in lines
    assert "| alexnet | 0 | PyTorch eager | 13.00 | 1.300 | - |" in lines
    assert any("TVM 2 / PyTorch 2 threads" in line for line in lines)


def test_retime_groups_times_each_complete_group_once(tmp_path, monkeypatch):
    import argparse
    import json

    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        return argparse.Namespace(returncode=1)  # a failed timing is reported, not raised

    monkeypatch.setattr(plan.subprocess, "run", run)
    done = json.dumps({"latency_ms": {"tuned": 1.0}})
    args = argparse.Namespace(networks=["alexnet", "vgg-16"], network_seeds=[0],
                              presets=["xgb", "meta-BO-T"], network_rounds=3,
                              work_root=str(tmp_path / "work"), runs_dir=str(tmp_path / "runs"))
    for preset in ("xgb", "meta-BO-T"):  # alexnet's group complete, vgg-16's half
        (tmp_path / "work" / f"net-alexnet-{preset}-r3").mkdir(parents=True)
        (tmp_path / "work" / f"net-alexnet-{preset}-r3" / "report.json").write_text(done)
    (tmp_path / "work" / "net-vgg-16-xgb-r3").mkdir()
    (tmp_path / "work" / "net-vgg-16-xgb-r3" / "report.json").write_text(done)
    plan.retime_groups(args)
    (cmd,) = calls
    assert cmd[1:3] == ["-m", "bench.retime_networks"]
    assert cmd[cmd.index("--network") + 1] == "alexnet"
    assert cmd[cmd.index("--budget") + 1] == "r3"
    (tmp_path / "runs").mkdir()
    record = tmp_path / "runs" / "retime-alexnet-r3.json"
    record.write_text(json.dumps({"latency_ms": {"xgb": 1.0, "torch": 2.0}}))
    plan.retime_groups(args)
    assert len(calls) == 2  # a record of some presets only: timed again
    record.write_text(json.dumps({"latency_ms": {"xgb": 1.0, "meta-BO-T": 1.0}}))
    plan.retime_groups(args)
    assert len(calls) == 2  # recorded already


def test_run_records_name_paths_relative_to_the_repository_one_or_several():
    from bench.common import repo_relative

    assert repo_relative(os.path.join(REPO, "data", "a", "train")) == "data/a/train"
    assert repo_relative([os.path.join(REPO, "checkpoints", "a.ckpt"),
                          os.path.join(REPO, "checkpoints", "a-seed1.ckpt")]) == [
        "checkpoints/a.ckpt", "checkpoints/a-seed1.ckpt"]


def test_no_tasks_runs_only_the_networks_and_the_page_says_so(tmp_path):
    import argparse

    args = argparse.Namespace(tasks=[], presets=["xgb", "meta-BO-T"], seeds=[0], trials=32,
                              batch=16, runs_dir=str(tmp_path), pool_dirs=[],
                              report_only=False, overrides=[])
    assert plan.run_tasks(args, "unused") == ([], 0)
    assert not any(tmp_path.iterdir())  # no empty task-runs dir beside the network records
    text = page.markdown({"command": "c", "date": "d", "machine": "m", "trials": 256,
                          "batch": 16, "seeds": [0], "tasks": [],
                          "network_budget": "2 rounds per task", "network_seeds": [0, 1],
                          "summary": {}})
    assert "256 trials per run" not in text
    assert text.startswith("# Tuning frameworks side by side on whole networks")
    assert "networks end to end only, 2 rounds per task per network run, seeds [0, 1]" in text


def test_network_runs_say_what_their_cost_models_were_trained_on():

    def report(preset, cost_model, **cfg):
        return {"preset": preset, "cost_model": cost_model, "config": cfg}

    ckpt = os.path.join(REPO, "checkpoints", "a-super.ckpt")
    reports = [report("meta-BO-T", "metatune", metatune={
                   "checkpoint": ckpt, "ensemble": [ckpt.replace(".ckpt", "-seed1.ckpt")]},
                   xfer={"data": None}),
               report("xgb-Xfer", "xgb-xfer", metatune={"checkpoint": None},
                      xfer={"data": [os.path.join(REPO, "data", "a", "train"), "data/b/t"]}),
               report("xgb", "xgb", metatune={"checkpoint": ckpt}, xfer={"data": None})]
    assert plan.source_lines([plan.network_sources(r) for r in reports]) == [
        "- `checkpoints/a-super.ckpt + checkpoints/a-super-seed1.ckpt`: meta-BO-T",
        "- `data/a/train + data/b/t`: xgb-Xfer"]
