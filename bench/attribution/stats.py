"""The attribution's numbers: each variant's best latency over xgb's, paired within one task
and seed, after each budget of trials and at xgb's wall time for it; each part's gain; and
the sentences the page says about them."""

from __future__ import annotations

from bench.attribution.variants import BASELINE, DEFAULT, PARTS, Variant
from bench.common import geomean, median
from bench.frameworks.stats import best_at, round_seconds, time_curve

#: The budgets (trials) the tables compare at.
BUDGETS = (16, 32, 64, 128, 512)
#: A gain within this much of 1 is not told apart from noise in the sentences.
NOISE = 0.02


def groups(records: list[dict]) -> dict[tuple[str, int], dict[str, dict]]:
    """The finished runs by group, ``(task, seed)``, then by variant: every ratio is taken
    within one group."""
    out: dict[tuple[str, int], dict[str, dict]] = {}
    for r in records:
        out.setdefault((r["task"], r["seed"]), {})[r["variant"]] = r
    return out


def best_after(run: dict, trials: int) -> float | None:
    """The run's best latency after ``trials`` trials (``None``: its budget was smaller, or
    nothing measured by then)."""
    if run["trials_planned"] < trials:
        return None
    return best_at(run["curve"], trials)


def seconds_at(run: dict, trials: int) -> float | None:
    """The run's tuning seconds when its ``trials``-th trial was measured (the end of that
    round; ``None``: it never got there)."""
    if run["trials_planned"] < trials:
        return None
    return next((s for t, s in round_seconds(run) if t is not None and t >= trials), None)


def pair_ratio(run: dict, ref: dict, trials: int, equal_time: bool) -> tuple[bool, float | None]:
    """``run``'s best over ``ref``'s, both of one group, after ``trials`` trials, or (with
    ``equal_time``) ``run``'s best at the tuning seconds ``ref`` took for them.

    Returns:
        ``(paired, ratio)``: ``paired`` False when the pair cannot be compared (a budget
        below ``trials``, nothing of ``ref``'s yet); ``ratio`` ``None`` when ``run`` had no
        result by then (slower than anything). A run that finished its own budget sooner
        counts with its final best: it could only improve with the rest of the time.
    """
    base = best_after(ref, trials)
    if base is None or run["trials_planned"] < trials:
        return False, None
    if not equal_time:
        mine = best_after(run, trials)
        return mine is not None, None if mine is None else mine / base
    seconds = seconds_at(ref, trials)
    if seconds is None:
        return False, None
    mine = best_at(time_curve(run), seconds)
    return True, None if mine is None else mine / base


def cell(by_group: dict, name: str, ref: str, trials: int, equal_time: bool) -> dict:
    """One table cell: the geometric mean over groups of ``name``'s ratio to ``ref``
    (:func:`pair_ratio`), with ``n`` the pairs behind it and ``none`` those without a
    result by then (left out of the mean, counted here)."""
    ratios, none = [], 0
    for runs in by_group.values():
        if name in runs and ref in runs:
            paired, ratio = pair_ratio(runs[name], runs[ref], trials, equal_time)
            if paired:
                ratios.append(ratio)
                none += ratio is None
    return {"ratio": geomean(ratios), "n": len(ratios), "none": none}


def variant_rows(records: list[dict], variants: list[Variant], main: int) -> list[dict]:
    """One row per variant: its ratio to xgb after each of :data:`BUDGETS` trials and at
    xgb's wall time for them, the median tuning seconds of ``main`` trials and search
    seconds per round, and its runs."""
    by_group = groups(records)
    rows = []
    for v in variants:
        mine = [r for r in records if r["variant"] == v.name]
        rounds = [x.get("search_s") for r in mine for x in r["rounds"]]
        rows.append({
            "variant": v.name, "part": v.part, "what": v.what, "overrides": v.dotlist(),
            "runs": len(mine),
            "at_trials": {n: cell(by_group, v.name, BASELINE, n, False) for n in BUDGETS},
            "at_xgb_time": {n: cell(by_group, v.name, BASELINE, n, True) for n in BUDGETS},
            "tuning_s": median([seconds_at(r, main) for r in mine]),
            "search_s_per_round": median(rounds),
            "best_ms": median([best_after(r, main) for r in mine]),
        })
    return rows


def gain(by_group: dict, with_: str, without: str, start: str, trials: int,
         equal_time: bool) -> dict:
    """A part's gain: the latency without it over the latency with it (above 1: it pays),
    geometric mean over groups, from the configuration ``start`` (one of the two: the
    ratio is taken to it, at its wall time with ``equal_time``). ``none``: pairs where
    the other had no result by then (left out of the mean)."""
    if start == without:
        c = cell(by_group, with_, without, trials, equal_time)
        return {**c, "gain": None if c["ratio"] is None else 1.0 / c["ratio"]}
    c = cell(by_group, without, with_, trials, equal_time)
    return {**c, "gain": c["ratio"]}


def part_rows(records: list[dict], main: int) -> list[dict]:
    """One row per part (:data:`PARTS`) with a pair measured: its gain switched on (from
    xgb's side) and off (from the default), after ``main`` trials and at the starting
    configuration's wall time for them."""
    by_group = groups(records)
    names = {r["variant"] for r in records}
    rows = []
    for part in PARTS:
        row = {"part": part.name}
        for side, pair in (("on", part.on), ("off", part.off)):
            if pair and set(pair) <= names:
                with_, without = pair
                start = without if side == "on" else with_
                row[side] = {"with": with_, "without": without,
                             "trials": gain(by_group, with_, without, start, main, False),
                             "time": gain(by_group, with_, without, start, main, True)}
        if "on" in row or "off" in row:
            rows.append(row)
    return rows


def _fmt_gain(g: float) -> str:
    return f"{g:.2f}x"


def sentences(rows: list[dict], parts: list[dict], main: int) -> list[str]:
    """Three to six plain sentences from the numbers: what everything earns against xgb,
    each part's price switched off and on, what does not pay, and the tuning time."""
    out = []
    by_name = {r["variant"]: r for r in rows}
    default = by_name.get(DEFAULT)
    if default and default["at_trials"][main]["ratio"]:
        t, e = default["at_trials"][main], default["at_xgb_time"][main]
        text = (f"All parts together (the default) reach {t['ratio']:.2f}x xgb's best latency "
                f"after {main} trials ({t['n']} task-seed pairs)")
        if e["ratio"]:
            text += f" and {e['ratio']:.2f}x at xgb's wall time for them"
        out.append(text + ".")
    for side, words in (("off", "Each part's gain switched off in the default (latency "
                                f"without it over with it after {main} trials; above 1 "
                                "it pays): "),
                        ("on", "Its gain switched on alone from xgb's side: ")):
        priced = sorted(((p[side]["trials"]["gain"], p["part"]) for p in parts
                         if side in p and p[side]["trials"]["gain"]
                         and p["part"] != "everything"), reverse=True)
        if priced:
            out.append(words + "; ".join(f"{name} {_fmt_gain(g)}" for g, name in priced) + ".")
    idle = [p["part"] for p in parts if p["part"] != "everything"
            and all(p[s]["trials"]["gain"] is not None and p[s]["trials"]["gain"] <= 1 + NOISE
                    for s in ("on", "off") if s in p)]
    if idle:
        out.append(f"Within {NOISE:.0%} of nothing or worse wherever measured, so not earning "
                   "its place at this budget: " + ", ".join(idle) + ".")
    timed = [(r["tuning_s"], r["variant"]) for r in rows if r["tuning_s"]]
    if len(timed) > 1:
        named = [f"{name} {by_name[name]['tuning_s']:.0f} s" for name in (BASELINE, DEFAULT)
                 if by_name.get(name, {}).get("tuning_s")]
        slow, name = max(timed)
        out.append(f"Tuning time for {main} trials (median): " + ", ".join(
            [*named, f"the slowest {name} {slow:.0f} s"]) + ".")
    pairs = max((r["at_trials"][main]["n"] for r in rows), default=0)
    if out and pairs < 6:
        out.append(f"With at most {pairs} task-seed pair{'s' * (pairs != 1)} per cell these "
                   "are indications, not a verdict: each pair's ratio is in the runs' "
                   "records.")
    return out[:6]
