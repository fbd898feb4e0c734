# Last ran on commit f1232c5
# Since then (not run again): the pool is recorded by an observer of the BO search instead
# of patching it, and measured whole after the run (bench.common.measure), not by tuning.
"""How much can a better ranking still win? One BO round's whole candidate pool, measured.

Six changes that rank candidates better before measurement (more data, seed pairs, the
zero-shot scale and term, the compiled-code correction) tuned level with the default. This
benchmark measures the bound on any such change: in round ``R`` of a task, tuned as
``tune.py`` tunes it up to then, *every* candidate of the pool the evolutionary sampler
proposed is measured instead of the 16 the BO search picks. Per run it reports, each as the
latency of the best schedule of a choice over the pool's best:

- ``BO pick``: the 16 the BO search chose (what tuning measures);
- ``model top``: the 16 best by the cost model's score alone (no GP);
- ``random``: 16 drawn at random (the expectation, computed exactly over the pool);

and the pool's best against the task's best before the round (for ``R >= 2``): how much
the round could have gained at all. The pool's best, chosen on one noisy measurement, is
biased low; every schedule the page compares (the pool's five best, each choice's best) is
therefore measured a second time after the run, and the ratios use that second
measurement.

The same pool also measures adaptation where tuning uses it (issue 13): the support is the
task's ``16 x (R - 1)`` measurements so far, the query the next pool, drawn from mutations
of their best. Beside the model adapted online (what tuning used) and the same checkpoint
unadapted, ``--variants NAME=OVERRIDES`` adapt fresh copies of the cost model, built with
other ``metatune.*`` settings (``metatune.adapt_steps=20``,
``metatune.adapt_scope=last_gcn``), on the same measurements, and score the same pool:
their ranking and the best of their top 16 are reported beside the default's.

Runs are recorded one JSON each under ``--runs-dir`` as they finish: rerun to resume.

Usage:
    python -m experiments.pool_headroom --workloads resnet-18/fused_conv2d1_add1_relu11 \\
        --layout NHWC --rounds 1 2 --seeds 0 1 2
    python -m experiments.pool_headroom --rounds 5 --variants "s20=metatune.adapt_steps=20" \\
        --runs-dir docs/lab/search/runs/adapt-in-tuning --out docs/lab/search/adapt-in-tuning
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os

import numpy as np

from experiments.cold_start import is_network_task, workload_task
from bench.common import (geomean, measure, measured_span, median, named_overrides,
                    provenance, recorded_run, show_slow_steps, tune_tasks, write_results)

BATCH = 16  #: candidates a round measures in tuning (``trials_per_round``)
RETIMED = 5  #: the pool's best schedules measured a second time

DEFAULT_WORKLOADS = [  # the held-out NHWC convs of docs/lab/tuning/compiled-correction-tuning.md
    "resnet-18/fused_conv2d1_add1_relu11", "resnet-18/fused_conv2d6_add5_relu31",
    "alexnet/fused_conv2d1_add1_relu11", "vgg-16/fused_conv2d5_add2_relu21",
    "squeezenet/fused_conv2d_add_relu1", "squeezenet/fused_conv2d13_add8_relu81"]


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+", default=DEFAULT_WORKLOADS,
                   help="built-in network tasks (network/task) or generator workloads")
    p.add_argument("--config", default="preset=meta-BO-T",
                   help="tune config overrides (space-separated) of every run")
    p.add_argument("--rounds", type=int, nargs="+", default=[1, 2],
                   help="the round whose whole pool is measured (one run each)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--layout", choices=("NCHW", "NHWC"), default="NHWC")
    p.add_argument("--variants", nargs="*", default=[], metavar="NAME=OVERRIDES",
                   help="other online adaptations scored on the same pool: a cost model "
                        "built with these tune overrides, adapted on the task's measurements")
    p.add_argument("--runs-dir", default="docs/lab/search/runs/pool-headroom")
    p.add_argument("--out", default="docs/lab/search/pool-headroom")
    return p.parse_args()


class PoolRecorder:
    """Records round ``full_round``'s whole pool as the BO search scored and chose it: an
    observer of :class:`tuner.search.bo.BatchBOSearch` (``tuner.search.bo.observing``).

    Rounds up to it run as in tuning (the BO search picks ``BATCH``, tuning measures
    them); the pool is measured whole after the run (:func:`measure_pool`).

    Args:
        full_round: The round whose pool is measured whole (1: the first).
        fresh_model: The same cost model as tuning's, never updated: it scores the full
            round's pool as the model did before the task's first measurement.
        variants: Name -> another cost model, never updated during the run: before the
            full round is scored it adapts on all the task's measurements so far, as
            tuning's model did round by round.

    Attributes:
        rows: One per pool candidate of the full round, the BO search's picks first:
            ``prior`` (the cost model's score, adapted online to the rounds before),
            ``prior0`` (the unadapted model's), ``picked`` (chosen by BO), ``seconds``
            (filled by :func:`measure_pool`; ``None``: failed), with variants ``variants``
            (name -> score).
        mods: The scheduled modules of those candidates (what is measured).
        history_best_s: The task's best seconds before the full round (``None`` in round 1).
    """

    def __init__(self, full_round: int, fresh_model=None,
                 variants: dict | None = None) -> None:
        self.full_round = int(full_round)
        self.fresh_model = fresh_model
        self.variants = dict(variants or {})
        self.measured: tuple[list, list] = ([], [])  # candidates, results before the round
        self.rows: list[dict] = []
        self.mods: list = []
        self.history_best_s: float | None = None

    def on_results(self, search, candidates: list, results: list) -> None:
        """Keep the measurements before the full round (the variants adapt on them)."""
        if search.rounds < self.full_round:
            self.measured[0].extend(candidates)
            self.measured[1].extend(results)

    def on_round(self, search, pool: list, chosen: list[int], scores: np.ndarray) -> None:
        """In the full round: the task's best so far, and every pool candidate's scores."""
        if search.rounds != self.full_round:
            return
        if search.hist_y:
            best = max(search.hist_y)  # throughput; 0: every measurement failed
            self.history_best_s = 1.0 / best if best else None
        picked = set(chosen)
        order = chosen + [i for i in range(len(pool)) if i not in picked]
        candidates = [pool[i] for i in order]
        prior0 = (np.asarray(self.fresh_model.predict(search.context, candidates), float)
                  if self.fresh_model is not None else [None] * len(candidates))
        variants = {}
        for name, model in self.variants.items():
            if self.measured[0]:
                model.update(search.context, *self.measured)
            variants[name] = np.asarray(model.predict(search.context, candidates), float)
        for n, (i, p0) in enumerate(zip(order, prior0)):
            row = {"prior": float(scores[i]), "picked": i in picked,
                   "prior0": None if p0 is None else float(p0), "seconds": None}
            if variants:
                row["variants"] = {name: float(v[n]) for name, v in variants.items()}
            self.rows.append(row)
            self.mods.append(pool[i].sch.mod)


def expected_best_of_random(seconds: list[float], n: int) -> float:
    """The expected best (lowest) of ``n`` of ``seconds`` drawn without replacement.

    Sorted ascending, the ``i``-th (0-based) is the best of a draw with probability
    ``C(N - 1 - i, n - 1) / C(N, n)``.
    """
    s = sorted(seconds)
    total, n = len(s), min(n, len(s))
    return sum(math.comb(total - 1 - i, n - 1) * v for i, v in enumerate(s)) / math.comb(total, n)


def unadapted(rows: list[dict], full_round: int) -> list[float] | None:
    """The unadapted model's scores of the rows: ``prior0``, or in round 1 (nothing to
    adapt on yet) ``prior``; ``None`` when not recorded."""
    if all(r.get("prior0") is not None for r in rows):
        return [r["prior0"] for r in rows]
    return [r["prior"] for r in rows] if full_round == 1 else None


def variant_names(rows: list[dict]) -> list[str]:
    """The adaptation variants the rows were scored by (none: ``[]``)."""
    return list(rows[0].get("variants", {})) if rows else []


def scorings(rows: list[dict], full_round: int) -> dict[str, list[float]]:
    """Each ranking of the rows, by key suffix: ``""`` the model adapted online, ``"0"``
    unadapted (when recorded), ``"_NAME"`` each variant."""
    out = {"": [r["prior"] for r in rows]}
    zero = unadapted(rows, full_round)
    if zero is not None:
        out["0"] = zero
    for name in variant_names(rows):
        out["_" + name] = [r["variants"][name] for r in rows]
    return out


def choices(rows: list[dict], full_round: int) -> dict[str, list[int]]:
    """The rows each choice of ``BATCH`` takes: BO's picks, and the top by each ranking of
    :func:`scorings` (``top``: the model adapted to the rounds before, ``top0``: unadapted,
    ``top_NAME``: a variant)."""
    out = {"bo": [i for i, r in enumerate(rows) if r["picked"]]}
    for key, scores in scorings(rows, full_round).items():
        out["top" + key] = sorted(range(len(rows)), key=lambda i: -scores[i])[:BATCH]
    return out


def choice_bests(rows: list[dict], full_round: int) -> dict[str, int]:
    """Each choice's best row by the first timing (a failed row only when all failed)."""
    return {name: min(idx, key=lambda i: rows[i]["seconds"] or math.inf)
            for name, idx in choices(rows, full_round).items()}


def measure_pool(task, overrides: list[str], seed: int, full_round: int,
                 variants: list[tuple[str, list[str]]] = ()) -> dict:
    """Tune ``task`` (a :class:`tuner.engine.tasks.TaskInfo`) to round ``full_round``
    (``BATCH`` a round), then measure that round's whole pool as the BO search saw it, and
    time the schedules compared a second time.
    ``variants``: ``(name, overrides)`` of other cost models that adapt on the same
    measurements and score the same pool (:class:`PoolRecorder`).

    Returns:
        ``seed``, ``round``, ``history_best_s`` (the task's best before the round),
        ``pool``, ``measured_ok``, ``rows`` (:class:`PoolRecorder`'s, with
        ``seconds_again`` where timed twice), ``tuning_seconds``, ``checkpoint``.
    """
    from tuner.app.config import load_tune_config
    from tuner.app.preflight import with_model_sources
    from tuner.app.tuning import build_cost_model
    from tuner.engine.targets import resolve_target

    import tuner.search.bo as bo

    overrides = [*overrides, f"trials={full_round * BATCH}", f"trials_per_round={BATCH}",
                 f"seed={seed}"]  # the task stops after the full round
    info = resolve_target("llvm")

    def model(more: list[str]):
        cfg = load_tune_config(overrides=[*overrides, *more])
        return build_cost_model(with_model_sources(cfg, info), info)

    recorder = PoolRecorder(full_round, model([]),
                            {name: model(more) for name, more in variants})
    with bo.observing(recorder):
        tuned = tune_tasks([task], overrides, prefix="pool-headroom-")
    rows = recorder.rows
    runner = {k: v for k, v in dataclasses.asdict(tuned.cfg.runner).items()
              if k not in ("kind", "rpc")}  # timed locally, as the local runner does
    for row, secs in zip(rows, measure(recorder.mods, info, runner)):
        row["seconds"] = secs
    ok = [i for i, r in enumerate(rows) if r["seconds"] is not None]
    pool_top = sorted(ok, key=lambda i: rows[i]["seconds"])[:RETIMED]
    again = sorted({*pool_top, *(i for i in choice_bests(rows, full_round).values()
                                 if rows[i]["seconds"])})
    for i, secs in zip(again, measure([recorder.mods[i] for i in again], info, runner)):
        rows[i]["seconds_again"] = secs
    return {"seed": seed, "round": full_round, "history_best_s": recorder.history_best_s,
            "pool": len(rows), "measured_ok": len(ok), "rows": rows,
            "tuning_seconds": tuned.outcome.tuning_seconds,
            "checkpoint": tuned.cfg.metatune.checkpoint
            if tuned.cfg.cost_model == "metatune" else None}


def headroom(run: dict) -> dict | None:
    """One run's figures: each choice's best over the pool's best (latency, on the second
    measurement), the expected best of a random choice over the pool's best (first
    measurement), the ranking of the pool by the model adapted to the rounds before and
    by the unadapted one, and the pool's best over the task's best before the round;
    ``None`` without a valid pool."""
    from metatune.metrics import pairwise_accuracy, top_k_recall

    rows = run["rows"]
    ok = [i for i, r in enumerate(rows) if r["seconds"] is not None]
    again = [r for r in rows if r.get("seconds_again")]
    if len(ok) < BATCH or not again:
        return None
    pool_best = min(r["seconds_again"] for r in again)
    out = {}
    for name, best in choice_bests(rows, run["round"]).items():
        secs = rows[best].get("seconds_again") or rows[best]["seconds"]
        out[name] = secs / pool_best if secs else None
    first = [rows[i]["seconds"] for i in ok]
    out["random"] = expected_best_of_random(first, BATCH) / min(first)
    tput = 1.0 / np.array(first)
    for key, scores in scorings(rows, run["round"]).items():
        prior = np.array([scores[i] for i in ok])
        out["pairwise" + key] = pairwise_accuracy(prior, tput)
        out["top5" + key] = top_k_recall(prior, tput)
        order = np.argsort(-prior, kind="stable")
        out["pool_best_rank" + key] = int(np.where(order == int(np.argmax(tput)))[0][0]) + 1
    hist = run.get("history_best_s")
    out["pool_over_history"] = pool_best / hist if hist else None
    bo_best = out["bo"] * pool_best if out["bo"] else None
    out["bo_over_history"] = min(bo_best, hist) / hist if hist and bo_best else None
    return out


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def summarize(runs: list[dict]) -> dict:
    """Per round: geometric means of the ratios over runs, means of the ranking figures,
    medians of the ranks and pool sizes."""
    out = {}
    for rnd in sorted({r["round"] for r in runs}):
        rs = [h for r in runs if r["round"] == rnd and (h := headroom(r)) is not None]
        out[str(rnd)] = {
            "runs": len(rs),
            **{f"{k}_over_pool": geomean([h.get(k) for h in rs])
               for k in ("bo", "top", "top0", "random")},
            "bo_is_pool_best": sum(h["bo"] is not None and h["bo"] <= 1.0 + 1e-9 for h in rs),
            **{k: _mean([h.get(k) for h in rs])
               for k in ("pairwise", "pairwise0", "top5", "top50")},
            "median_pool_best_rank": median([h["pool_best_rank"] for h in rs]),
            "median_pool_best_rank0": median([h.get("pool_best_rank0") for h in rs]),
            "pool_over_history": geomean([h["pool_over_history"] for h in rs]),
            "bo_over_history": geomean([h["bo_over_history"] for h in rs]),
            "median_pool": median([r["pool"] for r in runs if r["round"] == rnd]),
        }
        names = dict.fromkeys(n for r in runs if r["round"] == rnd
                              for n in variant_names(r["rows"]))
        if names:
            out[str(rnd)]["variants"] = {n: _variant_summary(rs, "_" + n) for n in names}
    return out


def _variant_summary(rs: list[dict], key: str) -> dict:
    """One ranking's figures over the runs' :func:`headroom` dicts ``rs``: means of
    pairwise accuracy and top-5 recall, the mean gain in pairwise accuracy over the
    unadapted model (the rise with the task's measurements) and the runs where it beats
    the model adapted online, the median rank of the pool's best, the best of its top
    ``BATCH`` over the pool's best (geometric mean)."""
    have = [h for h in rs if h.get("pairwise" + key) is not None]
    return {"runs": len(have),
            "pairwise": _mean([h["pairwise" + key] for h in have]),
            "top5": _mean([h["top5" + key] for h in have]),
            "rise": _mean([h["pairwise" + key] - h["pairwise0"] for h in have
                           if h.get("pairwise0") is not None]),
            "above_default": sum(h["pairwise" + key] > h["pairwise"] for h in have),
            "median_pool_best_rank": median([h["pool_best_rank" + key] for h in have]),
            "top_over_pool": geomean([h.get("top" + key) for h in have])}


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


def main() -> None:
    args = _parse()
    show_slow_steps()
    os.makedirs(args.runs_dir, exist_ok=True)
    variants = named_overrides(args.variants, "--variants")
    wanted = {n: " ".join(o) for n, o in variants}
    runs = []
    plan = [(r, s, w) for r in args.rounds for s in args.seeds for w in args.workloads]
    for i, (rnd, seed, wl) in enumerate(plan, 1):
        path = os.path.join(args.runs_dir, f"{wl.replace('/', '--')}-r{rnd}-{seed}.json")
        runs.append(recorded_run(
            path, f"[{i}/{len(plan)}] {wl} round {rnd} seed {seed}",
            lambda: {"workload": wl, "variants": wanted,
                     **measure_pool(workload_task(wl, args.layout), [
                         *args.config.split(), f"layout={args.layout}"], seed, rnd, variants),
                     "layout": args.layout if is_network_task(wl) else None}))
        if runs[-1].get("variants", {}) != wanted:
            raise SystemExit(f"{path} was scored by the variants {runs[-1].get('variants', {})}"
                             f", not {wanted}: give the same --variants, or another --runs-dir")
    doc = {**provenance("experiments.pool_headroom"), "config": args.config, "seeds": args.seeds,
           "workloads": args.workloads, "rounds": args.rounds, "variants": wanted,
           "measured": measured_span(runs),
           "summary": summarize(runs),
           # each run's figures; its candidates' rows are in its file under --runs-dir
           "runs": [{k: r.get(k) for k in ("workload", "seed", "round", "pool", "date")}
                    | {"headroom": headroom(r)} for r in runs]}
    write_results(args.out + ".json", args.out + ".md", doc, markdown(doc), rows_key="runs")


if __name__ == "__main__":
    main()
