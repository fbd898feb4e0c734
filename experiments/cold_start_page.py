# Last ran on commit 82b5d40
"""The page of :mod:`experiments.cold_start`: its markdown from the results document."""

from __future__ import annotations

import os

from bench.common import REPO
from experiments.cold_start_tasks import is_network_task


def workloads_said(workloads: list[str], layout: str = "NCHW") -> str:
    """What the page's workloads are, for its header."""
    if all(is_network_task(w) for w in workloads):
        return f"built-in networks' tasks (`network/task`, extracted in {layout})"
    if any(is_network_task(w) for w in workloads):
        return ("generated validation workloads and built-in networks' tasks (extracted "
                f"in {layout})")
    return "the checkpoint's validation convolutions (never trained on, not benchmark tasks)"


def sources_said(runs: list[dict]) -> list[str]:
    """One bullet per configuration whose cost model was trained on something: what."""
    said: dict[str, str] = {}
    for r in runs:
        where = r.get("checkpoint") or r.get("xfer_data")
        if where and r.get("ensemble"):  # the checkpoints averaged with it
            where = [where, *r["ensemble"]]
        if where and r["config"] not in said:
            said[r["config"]] = " + ".join(
                os.path.relpath(p, REPO) if os.path.isabs(p) else p
                for p in ([where] if isinstance(where, str) else where))
    return [f"- `{c}` trained on: `{w}`" for c, w in said.items()]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _at_cell(at: dict) -> str:
    """``0.912 (0.900, 0.925) | ``: a geomean after N trials and each seed's."""
    each = ", ".join(_num(v) for v in at["per_seed"].values())
    return f"{_num(at['geomean_over_base'])} ({each}) | "


def _by_range_section(doc: dict, heading: str, text: str,
                      columns: list[tuple[str, str]]) -> list[str]:
    """A page section tabling per-round means by trial range (:func:`batch_pairwise`),
    one row per configuration, the ranges of each ``(summary key, label)`` column group
    side by side; none when the first key has no value in any range."""
    first = columns[0][0]
    ranges = [r for r in dict.fromkeys(r for s in doc["summary"].values()
                                       for r in s.get(first, {}))
              if any(s.get(first, {}).get(r) is not None for s in doc["summary"].values())]
    if not ranges:
        return []
    lines = ["", f"## {heading}", "", text, "",
             "| configuration | " + " | ".join(f"{label} {r}" for _, label in columns
                                               for r in ranges) + " |",
             "|---|" + "---|" * (len(columns) * len(ranges))]
    lines += [f"| {config} | " + " | ".join(_num(s.get(key, {}).get(r)) for key, _ in columns
                                            for r in ranges) + " |"
              for config, s in doc["summary"].items()]
    return lines


def markdown(doc: dict) -> str:
    configs = list(doc["summary"])
    workloads = list(doc["summary"][configs[0]]["median_best_ms"])
    per_round = doc.get("trials_per_round") or doc["trials"]
    at = doc.get("report_at") or []
    title = ("First round: the batch chosen before any measurement of the task"
             if per_round == doc["trials"] else "Tune settings side by side over whole runs")
    budget = (f"one round of {doc['trials']} trials" if per_round == doc["trials"]
              else f"{doc['trials']} trials in rounds of {per_round}")
    lines = [f"# {title}", "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']}",
             *([f"- runs measured {doc['measured'][0]} to {doc['measured'][1]}"]
               if doc.get("measured") else []),
             f"- {budget} per run, seeds {doc['seeds']}, "
             f"{doc['runs_done']} runs; workloads: "
             + workloads_said(workloads, doc.get("layout", "NCHW")),
             *sources_said(doc.get("runs", [])),
             "- configurations (the first is the baseline): "
             + "; ".join(f"`{c}`: `{o}`" for c, o in doc["configs"].items()), "",
             "| configuration | best vs baseline (geomean) | each seed's | "
             + "".join(f"after {n} trials (each seed's) | " for n in at)
             + "workloads better | search s (median) | tuning s (median) | "
             "runs without result | " + " | ".join(workloads) + " |",
             "|---|---|---|---|---|---|---|" + "---|" * (len(workloads) + len(at))]
    for config, s in doc["summary"].items():
        tuning = s.get("median_tuning_s")
        each = ", ".join("-" if v is None else f"{v:.3f}"
                         for v in s.get("geomean_over_base_per_seed", {}).values())
        lines.append(f"| {config} | {_num(s['geomean_over_base'])} | {each or '-'} | "
                     + "".join(_at_cell(s["at_trials"][str(n)]) for n in at)
                     + f"{s['workloads_better']} "
                     f"of {len(workloads)} | {s['median_search_s']:.1f} | "
                     f"{'-' if tuning is None else f'{tuning:.0f}'} | "
                     f"{s['runs_without_result']} | "
                     + " | ".join("-" if s["median_best_ms"][w] is None
                                  else f"{s['median_best_ms'][w]:.3f}" for w in workloads)
                     + " |")
    lines += ["", "Best vs baseline: the geometric mean over workloads of the best latency "
              "over the baseline's (below 1: better), from the per-workload medians over "
              "seeds; each seed's: the same within each seed's runs (paired: same workload, "
              "seed and budget)."
              + (" After N trials: the same comparison of each run's best after its "
                 "first N trials (from the run's curve), as if the budget had been N."
                 if at else ""),
              "", "Per workload: the best latency (ms) of the run, median over the seeds "
              "that measured something. Runs without result: TVM's evolutionary sampler "
              "raised on every try (`The block no longer exists in the IRModule`, seen on "
              "a winograd workload); BO logs it and the run survives, but measures nothing "
              "for that task."]
    lines += _by_range_section(
        doc, "The cost model's ranking of each batch before it was measured",
        "Pairwise accuracy of the model's predictions of each measured batch against the "
        "run times then measured (higher is better; 0.5 is chance), mean over the rounds of "
        "every run whose last trial falls in the range: what the online updates teach the "
        "model about the task while tuning.", [("batch_pairwise", "trials")])
    lines += _by_range_section(
        doc, "How far each batch lay from what the task had measured",
        "Distances between knob vectors (the BO search's, `tuner/search/knobs.py`; "
        "decisions scaled to about [0, 1]), mean over the rounds whose last trial falls in "
        "the range: novelty, from each batch candidate to its nearest earlier measurement "
        "of the task (small: the search stays where it has measured); spread, between two "
        "candidates of one batch.", [("batch_novelty", "novelty"), ("batch_spread", "spread")])
    return "\n".join(lines) + "\n"
