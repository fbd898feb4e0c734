"""The page writers of the maintained benchmarks without a test file of their own: trial
overhead (``bench.trial_overhead``), RPC throughput (``bench.rpc_throughput``) and the
fault table (``bench.faults``), each from a small synthetic result (nothing is tuned)."""

from __future__ import annotations

from bench import faults, rpc_throughput, trial_overhead

PROV = {"command": "python -m bench.x --seeds 0", "date": "2026-12-07", "machine": "cpu"}


def _trial_run(variant: str, seed: int, tuning: float, total: float, best: float | None):
    return {"variant": variant, "seed": seed, "trials": 32, "valid": 30, "best_ms": best,
            "startup_s": 2.0, "tuning_s": tuning * 32, "total_s": total * 32, "errors": [],
            "tuning_s_per_trial": tuning, "total_s_per_trial": total}


def test_trial_overhead_page_gives_each_run_and_the_speed_up_per_seed():
    runs = [_trial_run("metaschedule", 0, 2.0, 3.0, 1.5), _trial_run("metatune", 0, 1.0, 1.0, None),
            _trial_run("metaschedule", 1, 4.0, 6.0, 1.2), _trial_run("metatune", 1, 1.0, 2.0, 1.1)]
    summary = trial_overhead.summarize(runs)
    speed = summary["speedup_vs_baseline"]["metatune"]
    assert [r["tuning_per_trial"] for r in speed["per_seed"]] == [2.0, 4.0]
    assert speed["median_tuning_per_trial"] == 3.0 and speed["median_total_per_trial"] == 3.0
    assert summary["per_variant"]["metatune"]["best_ms"] == 1.1  # a run without one left out
    page = trial_overhead.markdown({**PROV, "trials": 32, "runs": runs, "summary": summary})
    assert page.startswith("# Wall time per tuning trial")
    assert "- command: `python -m bench.x --seeds 0`" in page
    assert "| metatune | 0 | 32 | 30 | - | 2.0 | 1.00 | 1.00 |" in page
    assert "| metaschedule | 2 | 3.00 | 4.50 | 1.350 |" in page
    assert "tuning loop 3.0x, including process start-up 3.0x." in page


def test_rpc_throughput_page_gives_medians_and_ratios_to_the_local_runner_per_seed():
    rows = [{"runner": "local", "seed": 0, "trials_per_min": 60.0},
            {"runner": "rpc, 1 server(s) x 2 thread(s)", "seed": 0, "trials_per_min": 30.0},
            {"runner": "local", "seed": 1, "trials_per_min": 40.0},
            {"runner": "rpc, 1 server(s) x 2 thread(s)", "seed": 1, "trials_per_min": 40.0}]
    page = rpc_throughput.markdown({**PROV, "target": "llvm -mcpu=x", "runtime": {"t": 2},
                                    "task": "resnet-18/conv", "trials": 64, "batch": 16,
                                    "seeds": [0, 1], "rows": rows})
    assert page.startswith("# Measurement throughput through the RPC tracker")
    assert "Command: `python -m bench.x --seeds 0`" in page
    assert "Task `resnet-18/conv`, random schedules, 64 trials in rounds of 16, seeds [0, 1]" \
        in page
    assert "| local | 50.0 | 1.00 |" in page
    assert "| rpc, 1 server(s) x 2 thread(s) | 35.0 | 0.75 |" in page  # ratios 0.5, 1.0


def test_fault_table_rows_stay_on_one_line():
    assert faults.TABLE_HEAD[0].count("|") == faults.TABLE_HEAD[1].count("|") == 6
    line = faults.table_line("1. disk full", "exit 1: error: a | b\nc", 16, 16, True, 12.4)
    assert line == "| 1. disk full | exit 1: error: a \\| b c | 16 | 16 | pass (12 s) |"
    assert faults.table_line("2. lock", "x", "?", "?", False, 0.2).endswith("| FAIL (0 s) |")
