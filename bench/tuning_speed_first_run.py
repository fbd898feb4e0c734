"""Preset ``first-run`` on the tuning-speed page (:mod:`bench.tuning_speed_page`): the
default as a user's first ``tune.py`` run gets it (the tuning memory on, empty, the work
dir's own; schedule transfer from the shipped datasets). Its results: per seed and network,
its latency over the default's at the default budget (``tune.py``'s ``trials``); its part of
the page."""

from __future__ import annotations

import statistics

from bench.tuning_speed_records import FIRST_RUN, ms_text

#: Preset ``first-run``'s name on the page.
FIRST_RUN_NAME = ("default, first run: memory on, empty; schedule transfer from the shipped "
                  "datasets")
#: Its bullet under "How it is measured".
FIRST_RUN_MEASURED = (
    "- first run: the default's arguments with `memory.path=<work dir>/memory` in place of "
    "`--no-memory`. Its first rung starts from an empty memory, so each task's first round "
    "takes up to half its candidates from the shipped datasets (schedule transfer); a later "
    "rung finds in that memory only its own earlier rungs' records, which its work dir "
    "holds already.")


def first_run_paragraph(budget: int) -> str:
    """The page's paragraph on preset first-run (shown when a network has its records),
    ``budget`` the default budget."""
    return (f"**first run** ({FIRST_RUN_NAME}; `--presets {FIRST_RUN}`, not run by "
            "default): the default as a user's first `tune.py` run gets it, the tuning memory "
            "on instead of `--no-memory`, but a memory of its own per work dir "
            "(`memory.path=<work dir>/memory`, empty at its first rung), so that no run "
            "reads another's records: only the shipped datasets feed its schedule transfer. "
            "`first run / default` is its latency over the default's at "
            f"{budget} trials (median over seeds); in the tables below, `/ xgb` is its "
            "latency over xgb's at the same rung and seed.")


def seed_first_run(default: dict[int, dict], first: dict[int, dict], budget: int) -> dict:
    """One seed's ``first_run_budget_ratio`` (first-run's latency over the default's at
    ``budget`` trials; ``None`` where either is missing) and ``reason``.

    Args:
        default: budget -> ``latency_ms`` (``None``: not timed), the default's rungs.
        first: The same, first-run's rungs.
        budget: The default budget.
    """
    a, b = ((p.get(budget) or {}).get("latency_ms") for p in (first, default))
    if a is None or b is None:
        who = [n for n, v in (("first-run's", a), ("the default's", b)) if v is None]
        rungs = "rungs are" if len(who) > 1 else "rung is"
        return {"first_run_budget_ratio": None,
                "reason": f"not measured yet: {' and '.join(who)} {budget} {rungs} "
                          "missing or not timed yet"}
    return {"first_run_budget_ratio": a / b,
            "reason": f"first-run's {ms_text(a)} ms is {a / b:.2f}x the default's {ms_text(b)} ms "
                      f"at {budget} trials"}


def first_run_result(points: dict[str, dict[int, dict[int, dict]]], budget: int) -> dict:
    """A network's first-run results.

    Args:
        points: preset -> seed -> budget -> ``latency_ms`` (the page's ``points_of``).
        budget: The default budget.

    Returns:
        ``first_run_budget_ratio`` (the median over the seeds with the data, ``None`` when
        none has), ``first_run_budget_ratio_seeds`` and ``first_run_per_seed`` (each seed
        with a first-run rung: ``seed`` and :func:`seed_first_run`'s keys).
    """
    default, first = points.get("default", {}), points.get(FIRST_RUN, {})
    per_seed = [{"seed": s, **seed_first_run(default.get(s, {}), first[s], budget)}
                for s in sorted(first)]
    ratios = {p["seed"]: p["first_run_budget_ratio"] for p in per_seed
              if p["first_run_budget_ratio"] is not None}
    return {"first_run_budget_ratio": statistics.median(ratios.values()) if ratios else None,
            "first_run_budget_ratio_seeds": sorted(ratios), "first_run_per_seed": per_seed}


def has_first_run(n: dict) -> bool:
    """Whether a network's results (the page's ``collect``) have a first-run rung."""
    return any(r["preset"] == FIRST_RUN for r in n["rungs"])


def first_run_cells(r: dict | None, xgb: dict | None) -> list[str]:
    """A rung's first-run cells: cumulative tuning seconds, latency, latency over xgb's."""
    if r is None:
        return ["-"] * 3
    ms, ref = r["latency_ms"], (xgb or {}).get("latency_ms")
    return [f"{r['cumulative_tuning_seconds']:.0f}", ms_text(ms),
            "-" if ms is None or not ref else f"{ms / ref:.2f}x"]
