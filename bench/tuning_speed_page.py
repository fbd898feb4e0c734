"""The tuning-speed benchmark's results and page, from its records
(:mod:`bench.tuning_speed`: the rung records and each network's side-by-side timing).

Per network and seed: xgb's latency ``L`` at :data:`REFERENCE_BUDGET` trials and its
cumulative tuning time ``T`` to get there; the default's first rung whose latency is at or
below ``L``, and ``time_fraction`` = that rung's cumulative tuning time / ``T`` (at rung
granularity: an upper bound, the default may have reached ``L`` earlier within the rung);
``default_budget_ratio`` = the default's latency over xgb's at :data:`DEFAULT_BUDGET`
trials. Per network, the median of each over the seeds that have the data. Where preset
``first-run`` has records (:mod:`bench.tuning_speed_first_run`): ``first_run_budget_ratio``
= its latency over the default's at :data:`DEFAULT_BUDGET` trials (median over seeds), and
its columns.
"""

from __future__ import annotations

import math
import os
import statistics

from bench.common import machine_lines, measured_span, repo_relative, write_results
from bench.frameworks.plan import code_lines
from bench.machine_load import LOADED_SHARE
from bench.tuning_speed_first_run import (
    FIRST_RUN_MEASURED,
    first_run_cells,
    first_run_paragraph,
    first_run_result,
    has_first_run,
)
from bench.tuning_speed_records import FIRST_RUN, artifact_key, read_json, rung_records, timing_path
from bench.tuning_speed_records import ms_text as _ms

#: xgb's budget whose latency the default must reach.
REFERENCE_BUDGET = 2048
#: The default budget (``tune.py``'s ``trials``, ``make tune``'s).
DEFAULT_BUDGET = 128
#: The goals: the default's time to xgb's 2048-trial latency over xgb's (and the
#: moonshot), and the default's latency over xgb's at the default budget.
GOAL = {"time_fraction": 0.25, "time_fraction_moonshot": 0.10, "default_budget_ratio": 0.85}
TITLE = "# Tuning speed: the default against MetaSchedule's own (preset xgb), whole networks"
#: Written before anything was measured on the last two networks; kept verbatim.
NETWORKS_PARAGRAPH = """\
Networks (issue 61 part 4): resnet-18, mobilenet-v2, and two torchvision networks that no
dataset, checkpoint or earlier benchmark here has used, named on 2026-12-07 at 06:55 UTC
before anything was measured on them: `torchvision.models:mobilenet_v3_small` and
`torchvision.models:regnet_y_400mf` (random weights, batch 1, 3x224x224)."""


def seed_time(xgb: dict[int, dict], default: dict[int, dict]) -> dict:
    """One seed's ``time_fraction``.

    Args:
        xgb: budget -> ``latency_ms`` (``None``: not timed) and
            ``cumulative_tuning_seconds``, xgb's rungs.
        default: The same, the default's rungs.

    Returns:
        ``status`` (``reached``, ``not reached``, or ``missing`` when the data cannot tell
        yet), ``time_fraction`` (``None`` unless reached), ``xgb_ms``, ``xgb_seconds``,
        ``default_budget`` and ``default_seconds`` (the rung that reached it), ``reason``
        (a sentence with the numbers).
    """
    ref = xgb.get(REFERENCE_BUDGET)
    out = {"status": "missing", "time_fraction": None, "xgb_ms": None, "xgb_seconds": None,
           "default_budget": None, "default_seconds": None}
    if ref is None or ref.get("latency_ms") is None:
        why = "is missing" if ref is None else "is not timed yet"
        return {**out, "reason": f"not measured yet: the {REFERENCE_BUDGET} rung of xgb {why}"}
    goal, seconds = ref["latency_ms"], ref["cumulative_tuning_seconds"]
    out.update(xgb_ms=goal, xgb_seconds=seconds)
    timed = sorted((b, r) for b, r in default.items() if r.get("latency_ms") is not None)
    for budget, rung in timed:
        if rung["latency_ms"] <= goal:
            fraction = rung["cumulative_tuning_seconds"] / seconds
            return {**out, "status": "reached", "time_fraction": fraction,
                    "default_budget": budget, "default_seconds": rung[
                        "cumulative_tuning_seconds"],
                    "reason": f"the default's {budget} rung ({_ms(rung['latency_ms'])} ms) "
                              f"reaches xgb's {REFERENCE_BUDGET}-trial latency {_ms(goal)} ms "
                              f"after {rung['cumulative_tuning_seconds']:.0f} s of tuning, "
                              f"{fraction:.2f} of xgb's {seconds:.0f} s"}
    if timed and timed[-1][0] >= REFERENCE_BUDGET:
        budget, rung = timed[-1]
        return {**out, "status": "not reached",
                "reason": f"xgb's {REFERENCE_BUDGET}-trial latency {_ms(goal)} ms is not "
                          f"reached by the default's {budget} rung ({_ms(rung['latency_ms'])} "
                          "ms) nor any before it"}
    top = f"reach only {timed[-1][0]} trials" if timed else "are not timed yet"
    return {**out, "reason": f"not measured yet: the default's timed rungs {top}, none at "
                             f"or below xgb's {REFERENCE_BUDGET}-trial {_ms(goal)} ms"}


def seed_ratio(xgb: dict[int, dict], default: dict[int, dict]) -> dict:
    """One seed's ``default_budget_ratio``: ``{"default_budget_ratio", "reason"}`` (the
    ratio ``None`` where either latency at :data:`DEFAULT_BUDGET` is missing)."""
    a, b = ((p.get(DEFAULT_BUDGET) or {}).get("latency_ms") for p in (default, xgb))
    if a is None or b is None:
        who = [n for n, v in (("the default's", a), ("xgb's", b)) if v is None]
        rungs = "rungs are" if len(who) > 1 else "rung is"
        return {"default_budget_ratio": None,
                "reason": f"not measured yet: {' and '.join(who)} {DEFAULT_BUDGET} {rungs} "
                          "missing or not timed yet"}
    return {"default_budget_ratio": a / b,
            "reason": f"the default's {_ms(a)} ms is {a / b:.2f}x xgb's {_ms(b)} ms at "
                      f"{DEFAULT_BUDGET} trials"}


def network_result(points: dict[str, dict[int, dict[int, dict]]]) -> dict:
    """A network's results from its rungs.

    Args:
        points: preset (``xgb``, ``default``) -> seed -> budget -> ``latency_ms`` and
            ``cumulative_tuning_seconds``.

    Returns:
        ``time_fraction`` and ``default_budget_ratio`` (medians over the seeds with the
        data; a seed whose default never reaches xgb's latency counts as infinitely slow,
        so a median it decides is ``None``, status ``not reached``), ``seeds`` (those that
        contributed to either), ``time_fraction_seeds``, ``default_budget_ratio_seeds``,
        ``time_status`` and ``per_seed`` (each seed's :func:`seed_time` and
        :func:`seed_ratio`).
    """
    xgb, default = points.get("xgb", {}), points.get("default", {})
    per_seed = []
    for seed in sorted(set(xgb) | set(default)):
        t = seed_time(xgb.get(seed, {}), default.get(seed, {}))
        r = seed_ratio(xgb.get(seed, {}), default.get(seed, {}))
        per_seed.append({"seed": seed, **{f"time_{k}" if k in ("status", "reason") else k: v
                                          for k, v in t.items()},
                         "default_budget_ratio": r["default_budget_ratio"],
                         "ratio_reason": r["reason"]})
    times = {s["seed"]: math.inf if s["time_status"] == "not reached" else s["time_fraction"]
             for s in per_seed if s["time_status"] != "missing"}
    ratios = {s["seed"]: s["default_budget_ratio"] for s in per_seed
              if s["default_budget_ratio"] is not None}
    fraction = statistics.median(times.values()) if times else None
    status = ("missing" if fraction is None else
              "not reached" if math.isinf(fraction) else "reached")
    return {"time_fraction": None if status != "reached" else fraction,
            "default_budget_ratio": statistics.median(ratios.values()) if ratios else None,
            "seeds": sorted(set(times) | set(ratios)),
            "time_fraction_seeds": sorted(times),
            "default_budget_ratio_seeds": sorted(ratios),
            "time_status": status, "per_seed": per_seed}


def network_rows(records: list[dict], timing: dict | None) -> list[dict]:
    """Every rung of a network's records, with its latency from the side-by-side timing
    (``None`` where not timed) and that over PyTorch eager's, by budget, seed, preset."""
    lat = (timing or {}).get("latency_ms", {})
    torch_ms = lat.get("torch")
    rows = []
    for rec in records:
        for r in rec["rungs"]:
            ms = lat.get(artifact_key(rec["preset"], rec["seed"], r["budget"]))
            rows.append({"preset": rec["preset"], "seed": rec["seed"], "budget": r["budget"],
                         **{k: r.get(k) for k in (
                             "trials_total", "tuning_seconds", "cumulative_tuning_seconds",
                             "predict_seconds", "untimed_trials", "check_error",
                             "preset_name", "machine_load")},
                         "latency_ms": ms,
                         "over_torch": None if ms is None or not torch_ms else ms / torch_ms})
    return sorted(rows, key=lambda r: (r["budget"], r["seed"], r["preset"]))


def points_of(rows: list[dict]) -> dict[str, dict[int, dict[int, dict]]]:
    """:func:`network_result`'s input from :func:`network_rows`' rows."""
    out: dict[str, dict[int, dict[int, dict]]] = {}
    for r in rows:
        out.setdefault(r["preset"], {}).setdefault(r["seed"], {})[r["budget"]] = r
    return out


def collect(runs: str, platform: str, networks: list[str]) -> dict:
    """Every network's rows, results and timing summary, and the records read (for the
    provenance lines)."""
    out, records = {}, []
    for network in networks:
        recs = rung_records(runs, platform, network)
        timing = read_json(timing_path(runs, platform, network))
        rows = network_rows(recs, timing)
        records += [r for rec in recs for r in rec["rungs"]] + ([timing] if timing else [])
        points = points_of(rows)
        out[network] = {**network_result(points), **first_run_result(points, DEFAULT_BUDGET),
                        "rungs": rows,
                        "torch_ms": (timing or {}).get("latency_ms", {}).get("torch"),
                        "timed": None if timing is None else {
                            k: timing.get(k) for k in ("date", "runtime", "target", "timing",
                                                       "machine_load")}}
    return {"networks": out, "records": records}


def _timing_load(timed: dict) -> str:
    """A warning when other processes took a share of the cores while a network was timed."""
    load = timed.get("machine_load") or {}
    if not load.get("loaded"):
        return ""
    return (f" **Under load**: other processes took {load['foreign_share']:.0%} of the cores "
            "while it was timed; these latencies are not clean (`--time --retime` on a quiet "
            "machine).")


def _loaded_mark(row: dict) -> str:
    """``*`` when the rung tuned while other processes took a share of the cores."""
    return "*" if (row.get("machine_load") or {}).get("loaded") else ""


def _ratio_cell(value: float | None) -> str:
    return f" {'-' if value is None else f'{value:.2f}'} |"


def _verdict(value: float | None, goal: float, status: str = "reached") -> str:
    if value is None:
        return "not measured" if status == "missing" else "**not reached**"
    return "reached" if value <= goal else "**not reached**"


#: A file in a platform's records directory whose text the page shows under "Notes on
#: these runs" (what the records cannot say: the machine's load, a change of code between
#: rungs), kept with the records.
NOTES_FILE = "NOTES.md"


def page(doc: dict, prov: dict, records: list[dict], run_notes: str = "") -> str:
    """The markdown page of :func:`collect`'s results (``doc``: the JSON document)."""
    g = GOAL
    first = any(has_first_run(n) for n in doc["networks"].values())
    first_head = (f" first run / default latency at {DEFAULT_BUDGET} trials |"
                  if first else "")
    lines = [TITLE, "", NETWORKS_PARAGRAPH, "",
             f"Command: `python -m bench.tuning_speed` (this page was last written by "
             f"`{prov['command']}`; `--report-only` rewrites it from the records in "
             f"`{doc['runs_dir']}/{doc['platform']}/`).", "",
             f"Goal (issue 61): the network latency that preset xgb reaches after "
             f"{REFERENCE_BUDGET} trials, reached by the default in at most "
             f"{g['time_fraction']:.0%} of xgb's tuning wall time (moonshot "
             f"{g['time_fraction_moonshot']:.0%}); and at the default budget "
             f"({DEFAULT_BUDGET} trials, `make tune`'s) a network latency at most "
             f"{g['default_budget_ratio']}x xgb's. Medians over the seeds that have the data.",
             *(["", first_run_paragraph(DEFAULT_BUDGET)] if first else []),
             "", "| network | seeds | default's time to xgb's latency / xgb's time | "
             f"<= {g['time_fraction']} | default / xgb latency at {DEFAULT_BUDGET} trials | "
             f"<= {g['default_budget_ratio']} |{first_head}",
             "|---|---|---|---|---|---|" + ("---|" if first else "")]
    for name, n in doc["networks"].items():
        tf, ratio = n["time_fraction"], n["default_budget_ratio"]
        tf_cell = "-" if tf is None else f"{tf:.2f}" + (" (moonshot)" if tf <= g[
            "time_fraction_moonshot"] else "")
        lines.append(f"| {name} | {', '.join(map(str, n['seeds'])) or '-'} | "
                     f"{'never' if n['time_status'] == 'not reached' else tf_cell} | "
                     f"{_verdict(tf, g['time_fraction'], n['time_status'])} | "
                     f"{'-' if ratio is None else f'{ratio:.2f}'} | "
                     f"{_verdict(ratio, g['default_budget_ratio'], 'missing')} |"
                     + (_ratio_cell(n["first_run_budget_ratio"]) if first else ""))
    lines += ["", "## Where a goal is not reached, and why", ""]
    for name, n in doc["networks"].items():
        notes = []
        if n["time_fraction"] is None or n["time_fraction"] > g["time_fraction"]:
            notes += [f"time, seed {s['seed']}: {s['time_reason']}." for s in n["per_seed"]]
        ratio = n["default_budget_ratio"]
        if ratio is None or ratio > g["default_budget_ratio"]:
            notes += [f"{DEFAULT_BUDGET} trials, seed {s['seed']}: {s['ratio_reason']}."
                      for s in n["per_seed"]]
        if not n["per_seed"]:
            notes = ["not measured yet: no rung of " + (
                "xgb or the default exists (only first-run's)." if n["rungs"] else
                "this network exists.")]
        if notes:
            lines += [f"- **{name}**:"] + [f"  - {t}" for t in notes]
    if lines[-1] == "":
        lines.append("Both goals are reached on every network.")
    for name, n in doc["networks"].items():
        lines += ["", f"## {name}", "", f"PyTorch eager: {_ms(n['torch_ms'])} ms"
                  + (f", timed side by side with every build below on {n['timed']['date']}."
                     + _timing_load(n["timed"]) if n["timed"] else "; nothing timed yet.")]
        if not n["rungs"]:
            lines += ["", "No rung yet."]
            continue
        has_first = has_first_run(n)
        lines += ["", "| budget | seed | " + " | ".join(
                      f"{p}: trials | {p}: tuning s (cumulative) | {p}: ms | {p}: / eager"
                      for p in ("xgb", "default")) + (
                      " | first run: tuning s (cumulative) | first run: ms | first run: / xgb"
                      if has_first else "") + " |", "|" + "---|" * (13 if has_first else 10)]
        by = {(r["budget"], r["seed"], r["preset"]): r for r in n["rungs"]}
        for budget, seed in sorted({(r["budget"], r["seed"]) for r in n["rungs"]}):
            cells = []
            for p in ("xgb", "default"):
                r = by.get((budget, seed, p))
                cells += (["-"] * 4 if r is None else [
                    str(r["trials_total"]),
                    f"{r['cumulative_tuning_seconds']:.0f}{_loaded_mark(r)}",
                    _ms(r["latency_ms"]),
                    "-" if r["over_torch"] is None else f"{r['over_torch']:.2f}x"])
            if has_first:
                cells += first_run_cells(by.get((budget, seed, FIRST_RUN)),
                                          by.get((budget, seed, "xgb")))
            lines.append(f"| {budget} | {seed} | " + " | ".join(cells) + " |")
    lines += ["", "## How it is measured", "",
              "- Each network, preset and seed has one work dir, tuned up the ladder of budgets "
              "by rerunning `tune.py --trials B` on it (it resumes from its database; each rung "
              "is a new process, the search restarting from the measurements so far), with "
              "`evaluate.enabled=false`; after each rung `export.py` compiles that rung's "
              "build (measured schedules, then the cost model's picks for tasks no "
              "measurement reached) and checks its output against PyTorch.",
              "- Tuning time: the sum over the rungs of `tune.py`'s tuning-loop wall time "
              "(`tuning_seconds` of its report), without process start-up, task extraction, "
              "the picks for unreached tasks (`predict_seconds`, in the JSON) or the export. "
              "The default's time to xgb's latency is counted to the end of the first rung "
              "that reaches it: at rung granularity, an upper bound.",
              "- `*` after a tuning time: while that rung tuned, other processes took more "
              f"than {LOADED_SHARE:.0%} of the cores (sampled from /proc every 2 s; "
              "`machine_load` in its record), so its time is inflated; a rung recorded before "
              "2026-12-07 10:20 UTC carries no such measurement, hence no mark.",
              "- Latency: every build of a network (all presets, seeds and rungs) and "
              "PyTorch eager loaded into one process and timed side by side in alternating "
              "rounds, each the median of its windows; the same input, the same threads.",
              *([FIRST_RUN_MEASURED] if first else []),
              ""]
    if run_notes.strip():
        lines += ["## Notes on these runs", "", run_notes.strip(), ""]
    lines += ["## Provenance", ""]
    lines += machine_lines(records)
    lines += ["- code (git commit) of the rungs:"]
    lines += ["  " + line for line in code_lines([r for r in records if "budget" in r])]
    timings = {(t["windows"], t["min_window_ms"], t["rounds"])
               for n in doc["networks"].values() if n["timed"] for t in [n["timed"]["timing"]]}
    lines += [f"- timing: {w} windows of at least {m} ms per build over {r} alternating rounds"
              for w, m, r in sorted(timings)]
    span = measured_span(records)
    if span:
        lines.append(f"- measured {span[0]} to {span[1]}")
    lines.append("")
    return "\n".join(lines)


def write_page(runs: str, out: str, prov: dict, networks: list[str], platform: str) -> dict:
    """``out``.md and ``out``.json from the records of ``networks`` on ``platform``.

    Returns:
        The JSON document.
    """
    got = collect(runs, platform, networks)
    doc = {"networks": got["networks"], "goal": GOAL, "reference_budget": REFERENCE_BUDGET,
           "default_budget": DEFAULT_BUDGET, "platform": platform,
           "runs_dir": repo_relative(runs),
           "command": prov["command"], "date": prov["date"], "machine": prov["machine"],
           "target": prov["target"], "runtime": prov["runtime"],
           "measured": measured_span(got["records"])}
    notes_path = os.path.join(runs, platform, NOTES_FILE)
    run_notes = ""
    if os.path.exists(notes_path):
        with open(notes_path, encoding="utf-8") as f:
            run_notes = f.read()
    write_results(out + ".json", out + ".md", doc, page(doc, prov, got["records"], run_notes))
    return doc
