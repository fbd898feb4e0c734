"""experiments.variant_ladder: a variant is the default plus its overrides in tune.py's
arguments, and the page pairs each variant's build with the default's of the same seed and
budget."""

from __future__ import annotations

from bench import tuning_speed as ts
from bench.common import geomean
from experiments import variant_ladder as vl


def test_a_variant_tunes_as_the_default_plus_its_overrides():
    focus, default = ts.plan(["n"], ["focus", "default"], [1], [256],
                             {"focus": ["first_round_trials=4"]})
    assert focus.variant == ("first_round_trials=4",) and default.variant is None
    assert ts.tune_args(focus, ["x=1"], "w") == [
        "seed=1", "first_round_trials=4", "x=1", "--no-memory"]
    assert ts.tune_args(default, [], "w") == ["seed=1", "--no-memory"]
    ts.check_tune_args(["default", "focus"], variants={"focus": ["first_round_trials=4"]})


def _row(preset: str, seed: int, budget: int, ms: float | None, seconds: float) -> dict:
    return {"preset": preset, "seed": seed, "budget": budget, "latency_ms": ms,
            "cumulative_tuning_seconds": seconds, "machine_load": None}


def test_pairs_ratios_and_summary():
    rows = [_row("default", 0, 256, 10.0, 100), _row("focus", 0, 256, 8.0, 90),
            _row("default", 1, 256, 10.0, 100), _row("focus", 1, 256, 11.0, 95),
            _row("default", 0, 512, 9.0, 200), _row("focus", 0, 512, None, 190)]
    pairs = vl.compare(rows, ["focus"])
    assert [(p["seed"], p["budget"], p["ratio"]) for p in pairs] == [
        (0, 256, 0.8), (0, 512, None), (1, 256, 1.1)]
    doc = {"title": "T", "command": "c", "date": "d", "measured": None,
           "variants": {"focus": ["first_round_trials=4"]}, "machines": [],
           "networks": {"net": {"pairs": pairs}},
           "summary": [{"variant": "focus", "budget": 256,
                        "ratio": geomean([0.8, 1.1]), "pairs": 2, "better": 1}]}
    text = vl.page(doc)
    assert "| focus | 0 | 256 | 10.00 | 8.00 | 0.800 | 100 | 90 |" in text
    assert "| focus | 0 | 512 | 9.00 | - | - | 200 | 190 |" in text
    assert "| focus | 256 | 0.938 | 2 | 1 |" in text
