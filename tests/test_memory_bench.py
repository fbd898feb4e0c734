"""The tuning memory's benchmark (``bench.memory_reuse``): its page from synthetic records,
and its plan (a dry run) without running anything."""

from __future__ import annotations

import json

from bench import memory_reuse


def _tuned(step: str, network: str, trials_run: int, known: int, seconds: float) -> dict:
    return {"step": step, "network": network, "work_dir": f"work/{step}", "trials": 128,
            "trials_run": trials_run, "tuning_seconds": seconds, "run_seconds": seconds + 60,
            "tasks": 21, "known": known, "records_copied": 16 * known,
            "budget": trials_run, "transfer": None, "preset": "meta-BO-T",
            "target": "llvm -mcpu=znver4 (2 cores)",
            "machine": {"cpu": "AMD EPYC", "cpu_flags": ["avx2"]},
            "runtime": {"tvm_threads": 2, "torch_threads": 2}, "code": "abc",
            "command": f"tune.py --trials 128 ({step})", "date": "2026-12-07T05:00:00+00:00"}


def test_page_from_synthetic_records(tmp_path):
    records = {
        "first": _tuned("first", "resnet-18", 128, 0, 120.0),
        "second-with-memory": _tuned("second-with-memory", "resnet34", 0, 21, 0.0),
        "second-alone": _tuned("second-alone", "resnet34", 128, 0, 130.0),
        "side-by-side": {
            "step": "side-by-side", "network": "resnet34",
            "latency_ms": {"second-with-memory": 40.0, "second-alone": 50.0},
            "latency_windows_ms": {"second-with-memory": [40.0], "second-alone": [50.0]},
            "rel_error": {"second-with-memory": 1e-6, "second-alone": 2e-6},
            "timing": {"windows": 10, "min_window_ms": 200, "rounds": 5,
                       "order": "alternating", "warm_call": True},
            "threads": 2, "target": "llvm -mcpu=znver4 (2 cores)",
            "machine": {"cpu": "AMD EPYC", "cpu_flags": ["avx2"]},
            "runtime": {"tvm_threads": 2, "torch_threads": 2}, "code": "abc",
            "date": "2026-12-07T06:00:00+00:00"},
    }
    out = str(tmp_path / "memory-reuse")
    memory_reuse.write_page(records, out, {"command": "python -m bench.memory_reuse",
                                           "date": "2026-12-07"})
    text = open(out + ".md", encoding="utf-8").read()
    assert ("| second-with-memory (the second network, after the first) | resnet34 | "
            "`memory` | 0 / 0 | 21 of 21 | 0.0 s | 60.0 s |") in text
    assert "| second-alone (the second network, empty memory) | resnet34 | `memory-empty` | "\
        "128 / 128 | 0 of 21 | 130.0 s | 190.0 s |" in text
    assert "measured 0 trials in 0.0 s of tuning (21 of its 21 tasks from the memory)" in text
    assert "| second-with-memory | 40.00 | 1.0e-06 |" in text and "0.80x" in text
    assert "AMD EPYC (flags: avx2)" in text and "measured 2026-12-07T05:00:00" in text
    doc = json.load(open(out + ".json", encoding="utf-8"))
    assert [r["step"] for r in doc["records"]] == [*memory_reuse.STEPS, "side-by-side"]


def test_a_page_without_records_says_so(tmp_path):
    text = memory_reuse.page({}, {"command": "python -m bench.memory_reuse"})
    assert text.count("not run yet") == 3 and "Not timed yet." in text


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path, capsys):
    root = tmp_path / "work"
    assert memory_reuse.main(["--dry-run", "--work-root", str(root), "--trials", "8",
                              "--first", "tests.models:tiny_convnet", "seed=1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines] == [*memory_reuse.STEPS, "side-by-side"]
    first, with_memory, alone = lines[:3]
    assert "--model tests.models:tiny_convnet" in first and "--trials 8" in first
    assert "--model torchvision.models:resnet34" in with_memory
    assert f"memory.path={root / 'memory'} " in first and f"memory.path={root / 'memory'} " \
        in with_memory and f"memory.path={root / 'memory-empty'} " in alone
    assert all(ln.endswith("seed=1") for ln in lines[:3])
    assert not root.exists()


def test_a_step_run_again_starts_from_a_fresh_work_dir_and_its_own_memory(tmp_path):
    root = str(tmp_path)
    for name in ("first", "second-with-memory", "second-alone", "memory", "memory-empty"):
        (tmp_path / name).mkdir()
    memory_reuse.fresh_start("second-with-memory", str(tmp_path / "second-with-memory"), root)
    assert not (tmp_path / "second-with-memory").exists()
    assert (tmp_path / "memory").exists()  # the first network's records: kept
    memory_reuse.fresh_start("second-alone", str(tmp_path / "second-alone"), root)
    assert not (tmp_path / "second-alone").exists() and not (tmp_path / "memory-empty").exists()
    memory_reuse.fresh_start("first", str(tmp_path / "first"), root)
    assert not (tmp_path / "first").exists() and not (tmp_path / "memory").exists()
