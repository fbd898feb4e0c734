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
import os

from bench.common import (
    measured_span,
    named_overrides,
    provenance,
    recorded_run,
    show_slow_steps,
    write_results,
)
from experiments.cold_start_tasks import is_network_task, workload_task
from experiments.pool_headroom_figures import (
    BATCH,
    RETIMED,
    choice_bests,
    choices,
    expected_best_of_random,
    headroom,
    scorings,
    summarize,
    unadapted,
    variant_names,
)
from experiments.pool_headroom_page import markdown
from experiments.pool_headroom_record import PoolRecorder, measure_pool

__all__ = [  # the names defined here before the split into siblings
    "BATCH", "DEFAULT_WORKLOADS", "PoolRecorder", "RETIMED", "choice_bests", "choices",
    "expected_best_of_random", "headroom", "is_network_task", "main", "markdown",
    "measure_pool", "scorings", "summarize", "unadapted", "variant_names",
    "workload_task"]

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
            lambda: {"workload": wl, "variants": wanted,  # noqa: B023 (called at once)
                     **measure_pool(workload_task(wl, args.layout), [  # noqa: B023 (called at once)
                         *args.config.split(), f"layout={args.layout}"], seed, rnd, variants),  # noqa: B023 (called at once)
                     "layout": args.layout if is_network_task(wl) else None}))  # noqa: B023 (called at once)
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
