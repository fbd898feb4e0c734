# Last ran on commit 591af28
"""Does the online adaptation fit the task's measurements, and does the fit carry over?

Issue 13's goal is a ranking that climbs with the task's own measurements (k = 0 -> 64),
and every adaptation variant so far stayed flat (``docs/lab/cost-model/model-accuracy*.md``).
Flat can mean two things: the adaptation barely moves the model (it does not even fit the k
samples it adapted on), or it fits them and what it learns does not carry to the task's
other candidates. This benchmark tells them apart: for each adaptation setting (steps,
step size, scope) it scores the pairwise accuracy on the support set (the k samples
adapted on: the fit) and on the query set (the workload's other candidates), before and
after adapting, on the checkpoint's validation workloads (to choose settings) or on a
held-out split.

The support set is random by default, as in ``bench.model_accuracy``. With ``--support
top`` it is what the tuner measures first: the k candidates the unadapted model scores
highest, and the query set is the ``--query`` candidates it scores next (what the
following rounds choose from). That asks whether adapting on its own top picks corrects
the model where the search looks, which random samples cannot tell (``docs/STATUS.md``:
better ranking on random samples has not given faster schedules). It is deterministic:
one draw, whatever the seeds.

Usage:
    python -m experiments.adaptation_fit --data data/llvm-znver4 \\
        --model checkpoints/llvm-znver4-plain.ckpt \\
        --settings 5:0.01:head 25:0.05:head 10:0.01:all --ks 16 64 --seeds 0 1
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import time

import numpy as np

from bench.common import provenance, write_results


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="the dataset (data/llvm-<cpu>)")
    p.add_argument("--model", required=True, help="a train.py checkpoint")
    p.add_argument("--split", default="val",
                   help="val: the checkpoint's validation workloads (to choose settings); "
                        "else a split of --data, e.g. heldout (to report)")
    p.add_argument("--settings", nargs="+", default=["5:0.01:head"],
                   metavar="STEPS:LR:SCOPE", help="adaptation settings to compare")
    p.add_argument("--ks", type=int, nargs="+", default=[16, 64])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--query", type=int, default=24)
    p.add_argument("--support", choices=("random", "top"), default="random",
                   help="random: k random samples; top: the model's own top k, the query "
                        "set its next --query (as the tuner measures)")
    p.add_argument("--limit", type=int, default=None, help="first N workloads only")
    p.add_argument("--out", default="docs/lab/cost-model/adaptation-fit")
    return p.parse_args()


def parse_setting(text: str) -> tuple[int, float, str]:
    """``STEPS:LR:SCOPE`` -> ``(steps, lr, scope)``.

    Raises:
        SystemExit: Not of that form.
    """
    try:
        steps, lr, scope = text.split(":")
        return int(steps), float(lr), scope
    except ValueError as err:
        raise SystemExit(f"--settings {text!r}: write STEPS:LR:SCOPE, e.g. 25:0.05:head "
                         "(scope: head, last_gcn or all)") from err


def load_workloads(args: argparse.Namespace, graph: str) -> list:
    """The workloads scored: the checkpoint's validation ones, or a split's."""
    from bench.accuracy.checkpoints import validation_workloads
    from bench.accuracy.workloads import load_eval_workloads, load_split_workloads

    need = args.query + max(args.ks)
    if args.split != "val":
        return load_eval_workloads(os.path.join(args.data, args.split), (graph,), need,
                                   limit=args.limit)
    names, splits = validation_workloads([args.model], args.data)
    return load_split_workloads(args.data, splits, (graph,), need, names, args.limit)


def top_split(scores: np.ndarray, k: int, query: int) -> tuple[np.ndarray, np.ndarray]:
    """``(support, query)`` indices as the tuner meets them: the ``k`` best-scored
    candidates (measured first), then the ``query`` scored next (ties: the earlier first)."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    return order[:k], order[k:k + query]


def fit_rows(model, setting: tuple[int, float, str], workloads: list, ks: list[int],
             seeds: list[int], query: int, support_mode: str = "random") -> list[dict]:
    """Pairwise accuracy on the support and query sets, before and after adapting.

    Args:
        model: A :class:`tuner.models.trained.TrainedModel` (copied, not changed).
        setting: ``(steps, lr, scope)``.
        workloads: :class:`bench.accuracy.EvalWorkload` list.
        ks: Support-set sizes (each > 1: a fit needs pairs).
        seeds: Seeds of the support/query draws.
        query: Query candidates per workload.
        support_mode: ``random`` (:func:`bench.accuracy.split_indices`) or ``top``
            (the unadapted model's best k, the query its next ``query``; seeds unused).

    Returns:
        One row per (k, seed, workload): ``fit_before``, ``fit_after``, ``query_before``,
        ``query_after``.
    """
    from bench.accuracy.methods import MetaTuneMethod
    from bench.accuracy.workloads import relative_targets, split_indices
    from metatune.metrics import pairwise_accuracy

    steps, lr, scope = setting
    after, before = copy.deepcopy(model), copy.deepcopy(model)
    after.inner.override(steps=steps, lr=lr, scope=scope, net=after.net)
    before.inner.override(steps=0, scope=scope, net=before.net)
    adapted, initial = MetaTuneMethod(after), MetaTuneMethod(before)
    rows = []
    for seed in seeds if support_mode == "random" else seeds[:1]:
        for w in workloads:
            if support_mode == "top":
                everything = np.arange(len(w.seconds))
                prior = initial.adapted_scores(w, everything[:0], everything)[1]
            for k in ks:
                support, q = (split_indices(len(w.seconds), k, query, seed)
                              if support_mode == "random" else top_split(prior, k, query))
                target = relative_targets(w.seconds, support)
                row = {"k": k, "seed": seed, "workload": w.name}
                for name, method in (("before", initial), ("after", adapted)):
                    s_pred, q_pred = method.adapted_scores(w, support, q)
                    row[f"fit_{name}"] = pairwise_accuracy(s_pred, target[support])
                    row[f"query_{name}"] = pairwise_accuracy(q_pred, target[q])
                rows.append(row)
    return rows


def summarize(rows: list[dict]) -> dict:
    """Per k: each column's mean over workloads, then median over seeds."""
    out = {}
    for k in sorted({r["k"] for r in rows}):
        sel = [r for r in rows if r["k"] == k]
        out[str(k)] = {
            col: float(np.median([np.nanmean([r[col] for r in sel if r["seed"] == s])
                                  for s in sorted({r["seed"] for r in sel})]))
            for col in ("fit_before", "fit_after", "query_before", "query_after")}
    return out


def markdown(doc: dict) -> str:
    lines = [f"# {doc['title']}", "", f"- command: `{doc['command']}`",
             f"- date: {doc['date']}", f"- machine: {doc['machine']}",
             f"- checkpoint: `{doc['model']}`; data: `{doc['data']}`, "
             f"{doc['workloads']} {doc['split_said']} workloads, query {doc['query']} "
             f"candidates each, seeds {doc['seeds']}; {doc['seconds']:.0f} s",
             "- pairwise ranking accuracy; fit: on the k support samples adapted on; query: "
             + ("on the workload's other candidates" if doc.get("support", "random") == "random"
                else "the candidates the unadapted model scores next after its top k (the "
                     "support set: what the tuner measures first)")
             + "; before / after the adaptation", "",
             "| setting (steps : lr : scope) | k | fit before | fit after | query before | "
             "query after | query change |", "|---|---|---|---|---|---|---|"]
    for setting, per_k in doc["summary"].items():
        for k, s in per_k.items():
            lines.append(f"| {setting} | {k} | {s['fit_before']:.3f} | {s['fit_after']:.3f} "
                         f"| {s['query_before']:.3f} | {s['query_after']:.3f} | "
                         f"{s['query_after'] - s['query_before']:+.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    args = _parse()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from bench.accuracy.checkpoints import data_target
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.targets import resolve_target
    from tuner.models.trained import load_model

    if min(args.ks) < 2:
        raise SystemExit("--ks: each k must be at least 2 (a fit is scored on pairs)")
    settings = {s: parse_setting(s) for s in args.settings}
    model = load_model(args.model, graph=None)
    load_tensor_intrinsics((resolve_target(data_target(args.data)).kind,))
    start = time.perf_counter()
    workloads = load_workloads(args, model.graph)
    if not workloads:
        raise SystemExit(f"no {args.split} workload has {args.query + max(args.ks)} samples")
    logging.info("%d workloads loaded", len(workloads))
    summary, rows = {}, []
    for text, setting in settings.items():
        t0 = time.perf_counter()
        got = fit_rows(model, setting, workloads, args.ks, args.seeds, args.query,
                       args.support)
        summary[text] = summarize(got)
        rows += [{"setting": text, **r} for r in got]
        logging.info("%s: %s (%.0f s)", text, summary[text], time.perf_counter() - t0)
    doc = {**provenance("experiments.adaptation_fit"),
           "title": "Does adaptation fit the task's measurements, and does it carry over?",
           "model": args.model, "data": args.data, "split": args.split,
           "split_said": ("validation (the checkpoint's, never trained on)"
                          if args.split == "val" else f"`{args.split}`"),
           "workloads": len(workloads), "query": args.query, "support": args.support,
           "seeds": args.seeds if args.support == "random" else args.seeds[:1],
           "seconds": time.perf_counter() - start, "summary": summary,
           "row_columns": list(rows[0]) if rows else [],
           "rows": [[round(v, 4) if isinstance(v, float) else v for v in r.values()]
                    for r in rows]}
    write_results(args.out + ".json", args.out + ".md", doc, markdown(doc), rows_key="rows")


if __name__ == "__main__":
    main()
