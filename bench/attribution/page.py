"""The attribution's markdown page, written from its document."""

from __future__ import annotations

from bench.attribution.stats import BUDGETS


def _cell(c: dict | None) -> str:
    """A ratio with the pairs behind it: ``0.912 (6)``, ``0.95 (5; 1 none)``, ``-``."""
    if not c or not c["n"]:
        return "-"
    ratio = "none" if c["ratio"] is None else f"{c['ratio']:.3f}"
    return ratio + (f" ({c['n']}; {c['none']} none)" if c["none"] else f" ({c['n']})")


def _gain(g: dict | None) -> str:
    if not g or not g["n"]:
        return "-"
    value = "none" if g["gain"] is None else f"{g['gain']:.3f}"
    return value + (f" ({g['n']}; {g['none']} none)" if g["none"] else f" ({g['n']})")


def _nested(lines: list[str]) -> list[str]:
    """Bullets under a bullet."""
    return ["  " + line for line in lines]


def _num(v: float | None, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def variant_table(rows: list[dict]) -> list[str]:
    """The first table: per variant, its ratios to xgb and its tuning time."""
    head = ("| variant | part | " + " | ".join(f"{n} trials" for n in BUDGETS) + " | "
            + " | ".join(f"xgb's time for {n}" for n in BUDGETS)
            + " | tuning s | search s / round | best ms (median) |")
    lines = [head, "|" + "---|" * (5 + 2 * len(BUDGETS))]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['part']} | "
            + " | ".join(_cell(r["at_trials"].get(n)) for n in BUDGETS) + " | "
            + " | ".join(_cell(r["at_xgb_time"].get(n)) for n in BUDGETS)
            + f" | {_num(r['tuning_s'], '.0f')} | {_num(r['search_s_per_round'], '.2f')} | "
            f"{_num(r['best_ms'], '.3f')} |")
    return lines


def part_table(parts: list[dict], main: int) -> list[str]:
    """The second table: per part, its gain switched on and switched off."""
    lines = [f"| part | on: with / without | on: gain after {main} trials | on: gain at "
             f"equal time | off: with / without | off: gain after {main} trials | off: gain "
             "at equal time |", "|---|---|---|---|---|---|---|"]
    for p in parts:
        cols = []
        for side in ("on", "off"):
            s = p.get(side)
            cols += ([f"{s['with']} / {s['without']}", _gain(s["trials"]), _gain(s["time"])]
                     if s else ["-", "-", "-"])
        lines.append(f"| {p['part']} | " + " | ".join(cols) + " |")
    return lines


#: The page's title (``--title`` gives a lab page its own).
TITLE = "What each part earns: attribution on held-out network tasks"


def markdown(doc: dict) -> str:
    """The page: how it was measured, the two tables, what the numbers say."""
    main = doc["trials"]
    lines = [
        f"# {doc.get('title') or TITLE}", "",
        f"- command: `{doc['command']}`", f"- date: {doc['date']}",
        *([f"- runs measured {doc['measured'][0]} to {doc['measured'][1]}"]
          if doc.get("measured") else []),
        "- measured on:", *_nested(doc["machines"]),
        *([f"- {doc['runs_loaded']} of the runs tuned while other processes took more than "
           "10 % of the cores (their times, and their measurements, are not clean)"]
          if doc.get("runs_loaded") else []),
        *(["- code (git commit) of the runs:", *_nested(doc["code"])] if doc.get("code") else []),
        *(["- what the cost models were trained on:", *_nested(doc["trained_on"])]
          if doc.get("trained_on") else []),
        f"- tasks ({doc['layout']}, as `tune.py` extracts them"
        + ("; held out: in no checkpoint's training data" if doc.get("heldout") else "")
        + f"): {', '.join(f'`{t}`' for t in doc['tasks'])}; seeds {doc['seeds']}; "
        f"{main} trials per run in rounds of {doc['batch']}; each run a fresh process; "
        "runs ordered seed, task, variant",
        f"- {doc['runs_done']} of {doc['runs_planned']} planned runs recorded "
        f"(records: `{doc['runs_dir']}`; rerun the command to resume)",
    ]
    for name, needs in doc.get("skipped", {}).items():
        lines.append(f"- **skipped** `{name}`: it needs " + "; ".join(
            f"`{path}` (make it: `{cmd}`)" for path, cmd in needs))
    for f in doc.get("failed", []):
        first = f["error"].splitlines()[0] if f.get("error") else "?"
        lines.append(f"- **failed** `{f['task']}` {f['variant']} seed {f['seed']}: {first} "
                     "(`--retry-failed` reruns it)")
    lines += ["", "## The variants against xgb", "",
              "Each cell: the geometric mean over (task, seed) of the variant's best latency "
              "over xgb's best in the same task and seed (below 1: faster), after that many "
              "trials, or at the tuning seconds (search + measurement + model update) xgb "
              "took for them; in brackets the pairs behind it, and how many had no result "
              "by then (left out of the mean). A run that finished its trials sooner counts "
              "with its final best. Columns past a run's budget show `-` (`--trials 512` "
              "measures the last). Tuning s: median seconds to "
              f"{main} trials.", "", *variant_table(doc["rows"]), ""]
    lines += ["## What each part earns", "",
              "Gain: the latency without the part over the latency with it (above 1: it "
              "pays), geometric mean over (task, seed). On: switched on from xgb's side "
              "(equal time: xgb's side's wall time); off: switched off in the default "
              "(equal time: the default's wall time).", "",
              *(part_table(doc["parts"], main) if doc["parts"] else
                ["No part has both of its variants measured yet."]), ""]
    if doc.get("sentences"):
        lines += ["## Reading it (written from the numbers)", "",
                  *[f"- {s}" for s in doc["sentences"]], ""]
    lines += ["## The variants", "", "| variant | what | tune overrides |", "|---|---|---|"]
    lines += [f"| {r['variant']} | {r['what']} | `{' '.join(r['overrides']) or '(none)'}` |"
              for r in doc["rows"]]
    return "\n".join(lines) + "\n"
