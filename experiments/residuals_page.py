# Last ran on commit ee6b9d7
"""The page of :mod:`experiments.residuals`: its markdown from the results document."""

from __future__ import annotations

from experiments.residuals_fit import GLOBAL_SPACES, RIDGE_PENALTY, SPACES, TREE_FOLDS


def _where_again(doc: dict) -> str:
    """Where the repeat was measured, for the page."""
    targets = doc.get("targets")
    if not targets:
        return "on the same kind of machine"
    if targets["data"] == targets["repeat"]:
        return f"for the same target, `{targets['repeat']}`"
    return (f"on another CPU: `{targets['data']}` and `{targets['repeat']}`; the residual's "
            "repeating share is then what the two CPUs' run times share beyond the model")


def _what_differs(doc: dict) -> str:
    targets = doc.get("targets")
    if targets and targets["data"] != targets["repeat"]:
        return "noise and the two CPUs' differences"
    return "noise"


def markdown(doc: dict) -> str:
    s = doc["summary"]
    lines = [f"# {doc['title']}", "", f"- command: `{doc['command']}`",
             f"- date: {doc['date']}", f"- computed on: {doc['machine']}",
             f"- checkpoint: `{doc['model']}` (its score before any measurement of the task, "
             "k = 0); data: `" + doc["data"] + "` and its repeat `" + doc["repeat"] +
             f"` (split `{doc['split']}`; the same schedules measured again, "
             + _where_again(doc) +
             f"): {doc['workloads']} workloads, {doc['samples']} schedules measured "
             f"twice ({doc['per_workload']} per workload); {doc['neighbours']} nearest "
             f"neighbours; {doc['seconds']:.0f} s"
             + (f"; skipped: {', '.join(doc['skipped'])}" if doc.get("skipped") else ""), "",
             "Means over the workloads, each scored on all its schedules measured twice "
             "(not on query subsets, so the figures are close to but not those of "
             "`model-accuracy*.md`); where two measurements enter, the mean of both "
             "directions:", "",
             "| figure | value |", "|---|---|",
             f"| pairwise, measurement 1 against 2 ({_what_differs(doc)}) | "
             f"{s['pairwise_noise']:.3f} |",
             f"| pairwise, model against a measurement | {s['pairwise_model']:.3f} |",
             f"| pairs the model scores alike (counted wrong by pairwise accuracy) | "
             f"{s['tied_pairs']:.4f} |",
             f"| Spearman, measurement 1 against 2 (its reliability) | "
             f"{s['spearman_noise']:.3f} |",
             f"| Spearman, model against a measurement | {s['spearman_model']:.3f} |",
             f"| Spearman, model against the noise-free run times (corrected for "
             f"attenuation) | {s['spearman_model_truth']:.3f} |",
             f"| residual variance over the measurement's (normal scores; 1: the model "
             f"explains nothing) | {s['residual_share']:.3f} |",
             f"| share of the residual that repeats in the other measurement (systematic) | "
             f"{s['residual_systematic']:.3f} |"]
    m = doc["neighbours"]
    learners = []
    for space, where in SPACES.items():
        learners += [(space, f"mean of the {m} nearest in {where}"),
                     (f"ridge_{space}", f"ridge over {where}, penalty {RIDGE_PENALTY:g}"
                      + (": a linear head's correction" if space == "embed" else "")),
                     (f"trees_{space}", f"boosted trees over {where}, {TREE_FOLDS}-fold "
                                        "cross-fitted")]
    learners += [(f"global_{space}", f"boosted trees over {SPACES[space]}, trained on the "
                                     "other networks' workloads only: a global model's "
                                     "correction")
                 for space in GLOBAL_SPACES]
    for space, said in learners:
        if f"nn_{space}" not in s:
            continue
        lines += [
            f"| correlation of a schedule's residual with the guess from the others' ({said}) | "
            f"{s['nn_' + space]:.3f} |",
            f"| pairwise, model and that guess, against the other measurement | "
            f"{s['pairwise_nn_' + space]:.3f} (model alone {s['pairwise_base_' + space]:.3f}) |"]
    lines += ["", "Read: the systematic share is the part of the residual a better model "
              f"could still remove (the rest is {_what_differs(doc)}); the correlations and "
              "the last rows "
              "are what these learners recover of it from the task's other "
              "schedules, all of them measured (more than issue 13's 64 for most "
              "workloads), or, for the global ones, from the other networks' workloads "
              "alone. They are particular learners: a lower bound on what the task's "
              "measurements can teach, not a ceiling."]
    if doc.get("compiled_correlations"):
        lines += ["", "The compiled code's features that go most with the model's residual "
                  "(`tuner/models/compiled_code.py`; each standardized within its workload, "
                  "correlated over all schedules with the residual and with the measured "
                  "throughput, both as normal scores, the mean of the two measurements):", "",
                  "| feature | with the residual | with the throughput |", "|---|---|---|"]
        lines += [f"| `{r['feature']}` | {r['residual']:+.3f} | {r['throughput']:+.3f} |"
                  for r in doc["compiled_correlations"]]
    return "\n".join(lines + [""])
