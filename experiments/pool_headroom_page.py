# Last ran on commit f1232c5
"""The page of :mod:`experiments.pool_headroom`: its markdown from the results document."""

from __future__ import annotations

from experiments.pool_headroom_figures import BATCH, RETIMED


def _num(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def markdown(doc: dict) -> str:
    """The page: per round the headroom and the adaptation tables, then each run."""
    s = doc["summary"]
    lines = ["# How much a better ranking could still win: one BO round's whole pool measured",
             "", f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             f"- machine: {doc['machine']}",
             f"- runs measured {doc['measured'][0]} to {doc['measured'][1]}"
             if doc.get("measured") else "- runs measured: -",
             f"- config: `{doc['config']}`; seeds {doc['seeds']}; workloads: "
             + ", ".join(f"`{w}`" for w in doc["workloads"]),
             f"- round R: the task tuned as `tune.py` tunes it for R - 1 rounds of {BATCH}, "
             f"then every candidate of round R's pool measured", "",
             "## Headroom", "",
             f"Each ratio: the latency of a choice's best schedule over the pool's best, on a "
             f"second measurement of both (the pool's {RETIMED} best and each choice's best "
             "timed again after the run; the random choice's expectation uses the first); "
             "geometric mean over runs. 1.000: the choice held the pool's best.", "",
             f"| round | runs | pool (median) | BO's {BATCH} | model's top {BATCH} | "
             f"unadapted model's top {BATCH} | random {BATCH} | BO's pick held the pool's "
             "best | pool's best / best before | BO's best / best before |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for rnd, v in s.items():
        lines.append(f"| {rnd} | {v['runs']} | {_num(v['median_pool'])} | "
                     f"{_num(v['bo_over_pool'])} | {_num(v['top_over_pool'])} | "
                     f"{_num(v['top0_over_pool'])} | {_num(v['random_over_pool'])} | "
                     f"{v['bo_is_pool_best']} of {v['runs']} | "
                     f"{_num(v['pool_over_history'])} | {_num(v['bo_over_history'])} |")
    lines += ["", "## Ranking of the pool: adapted online against unadapted", "",
              f"The cost model's scores of round R's pool after fine-tuning on the task's "
              f"{BATCH} x (R - 1) measurements (what tuning used) and the same checkpoint's "
              "before any (scored once the round was drawn), against the first measurement; "
              "mean over runs (ranks: median).", "",
              "| round | pairwise adapted | pairwise unadapted | top-5 recall adapted | "
              "top-5 recall unadapted | pool's best: rank adapted | rank unadapted |",
              "|---|---|---|---|---|---|---|"]
    for rnd, v in s.items():
        lines.append(f"| {rnd} | {_num(v['pairwise'])} | {_num(v['pairwise0'])} | "
                     f"{_num(v['top5'])} | {_num(v['top50'])} | "
                     f"{_num(v['median_pool_best_rank'])} | "
                     f"{_num(v['median_pool_best_rank0'])} |")
    if any("variants" in v for v in s.values()):
        lines += ["", "## Other online adaptations on the same pools", "",
                  "Each cost model adapted on the task's measurements before round R "
                  "(variants: a fresh model built with the overrides below, adapted once on "
                  "all of them, as tuning's model re-adapts from the checkpoint each round) "
                  "and scored on the same measured pool; rise: pairwise accuracy over the "
                  "unadapted model's on the same pool (issue 13's rise with k, in tuning's "
                  "setting); above online: runs whose pool it ranks better than the model "
                  f"tuning used; top {BATCH}: the best of its top {BATCH} over the pool's "
                  "best (geometric mean; second timing where the schedule was retimed).", "",
                  "| round | ranking | pairwise | rise | above online | top-5 recall | "
                  f"pool's best: rank (median) | top {BATCH} / pool's best |",
                  "|---|---|---|---|---|---|---|---|"]
        for rnd, v in s.items():
            ref = {"unadapted": {"pairwise": v["pairwise0"], "top5": v["top50"],
                                 "median_pool_best_rank": v["median_pool_best_rank0"],
                                 "top_over_pool": v["top0_over_pool"]},
                   "online (tuning's)": {"pairwise": v["pairwise"], "top5": v["top5"],
                                         "median_pool_best_rank": v["median_pool_best_rank"],
                                         "top_over_pool": v["top_over_pool"]}}
            for name, f in {**ref, **v.get("variants", {})}.items():
                rise = f.get("rise")
                if rise is None and name != "unadapted" and f["pairwise"] is not None \
                        and v["pairwise0"] is not None:
                    rise = f["pairwise"] - v["pairwise0"]
                above = (f"{f['above_default']} of {f['runs']}" if "above_default" in f
                         else "-")
                lines.append(f"| {rnd} | {name} | {_num(f['pairwise'])} | "
                             f"{'-' if rise is None else f'{rise:+.3f}'} | {above} | "
                             f"{_num(f['top5'])} | {_num(f['median_pool_best_rank'])} | "
                             f"{_num(f['top_over_pool'])} |")
        lines += ["", "Variants: " + "; ".join(f"`{n}`: `{o}`" for n, o in
                                               (doc.get("variants") or {}).items()) + "."]
    lines += ["", "## Each run", "", f"| round | workload | seed | pool | BO's {BATCH} | "
              f"model's top {BATCH} | unadapted top {BATCH} | random {BATCH} | pairwise "
              "adapted / unadapted | pool's best / best before |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        h = r.get("headroom") or {}
        lines.append(f"| {r['round']} | {r['workload']} | {r['seed']} | {r['pool']} | "
                     f"{_num(h.get('bo'))} | {_num(h.get('top'))} | {_num(h.get('top0'))} | "
                     f"{_num(h.get('random'))} | {_num(h.get('pairwise'))} / "
                     f"{_num(h.get('pairwise0'))} | {_num(h.get('pool_over_history'))} |")
    return "\n".join(lines) + "\n"
