# Last ran on commit 7aab942
"""Fill the compiled-code cache (:mod:`tuner.models.compiled_code`) ahead of an accuracy run,
on several processes, resumably.

``model_accuracy.py --compiled-correction`` builds every schedule it scores and every
schedule of the checkpoints' validation workloads for the scored data's target, one at a
time (0.25-0.6 s each on 2 cores; about 5,000 for a held-out split, 6,000 for a
checkpoint's validation workloads). This builds the same schedules into the same cache
(``<cache>/<hash of the target>-v<VERSION>/<workload>.json``) with ``--workers``
processes, each taking every N-th workload; what is cached is skipped, so an interrupted
run goes on where it stopped, and a cache folder not there yet starts from the features
shipped in ``data/compiled/``. The code is only read, never run: any machine whose LLVM
knows the target's CPU can build it, and nothing here is timed.

Usage:
    # the EPYC's held-out NHWC convs and both super checkpoints' validation workloads
    python -m experiments.compile_features --data data/llvm-znver4 --split heldout-nhwc \
        --checkpoint checkpoints/llvm-znver4-super.ckpt \
        --checkpoint checkpoints/llvm-znver4-super-seed1.ckpt --workers 2
    # another CPU's held-out convs, the EPYC pair's validation workloads built for the EPYC
    python -m experiments.compile_features --data data/llvm-znver5 --split heldout-nhwc \
        --train-data data/llvm-znver4 --checkpoint checkpoints/llvm-znver4-super.ckpt
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time

from bench.common import REPO


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="the dataset scored (its target is built for)")
    p.add_argument("--split", default="heldout-nhwc", help="the split scored (all its workloads)")
    p.add_argument("--checkpoint", action="append", default=[], metavar="CKPT",
                   help="also its validation workloads (repeatable)")
    p.add_argument("--train-data", default=None,
                   help="the dataset the checkpoints were trained on, when not --data "
                        "(model_accuracy.py --train-data): their validation workloads are "
                        "built for its CPU")
    p.add_argument("--cache", default="work/cache/compiled",
                   help="the cache folder (model_accuracy.py --compiled-cache)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="processes building at once (default: one per core)")
    p.add_argument("--shard", default=None, metavar="I/N", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def jobs(args: argparse.Namespace) -> list[tuple[str, list[str] | None, object]]:
    """What to build: ``(split folder, workload names or None for all, target)`` per split,
    the scored split first, each for the target ``model_accuracy.py`` builds it for."""
    from bench.accuracy.checkpoints import data_target, validation_workloads
    from experiments.compiled_correction import validation_target
    from tuner.engine.targets import resolve_target

    scored = os.path.join(args.data, args.split)
    target = resolve_target(data_target(scored)).target
    train_data = args.train_data or args.data
    out: list[tuple[str, list[str] | None, object]] = [(scored, None, target)]
    for checkpoint in args.checkpoint:
        names, splits = validation_workloads([checkpoint], train_data, "--checkpoint")
        val_target = validation_target(train_data, splits, args.data, target)
        out += [(os.path.normpath(os.path.join(train_data, s)), names, val_target)
                for s in splits]
    return out


def build_shard(args: argparse.Namespace, index: int, count: int) -> None:
    """Build this shard's workloads (every ``count``-th, from ``index``) of every job."""
    from bench.accuracy.workloads import load_eval_workloads
    from experiments.residuals import ordered_traces
    from tuner.models.compiled_code import compiled_features

    for split_dir, names, target in jobs(args):
        traces = ordered_traces(split_dir)
        mine = sorted(traces if names is None else set(names) & set(traces))[index::count]
        if not mine:
            continue
        started = time.time()
        workloads = load_eval_workloads(split_dir, (), 16, names=mine)
        for n, w in enumerate(workloads, 1):
            listed = traces[w.name]
            if [s for _, s in listed] != list(w.seconds):
                logging.warning("%s: records and replayed candidates differ: skipped", w.name)
                continue
            compiled_features(w.name, w.candidates, [t for t, _ in listed], target, args.cache)
            logging.info("[%d/%d] %s: %d/%d workloads (%s), %.0f s", index + 1, count,
                         split_dir, n, len(workloads), w.name, time.time() - started)


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.shard:
        index, count = (int(x) for x in args.shard.split("/"))
        build_shard(args, index, count)
        return
    from tuner.models.compiled_code import cache_folder

    # refuse a bad checkpoint, and unpack what is shipped, before the workers start
    try:
        targets = {str(t): t for _, _, t in jobs(args)}
    except ValueError as err:  # no split of --train-data's own to read its CPU from
        raise SystemExit(f"--train-data {args.train_data}: {err}") from err
    for target in targets.values():
        cache_folder(args.cache, target)
    base = [sys.executable, "-m", "experiments.compile_features"] + (
        argv if argv is not None else sys.argv[1:])
    workers = [subprocess.Popen(base + ["--shard", f"{i}/{args.workers}"], cwd=REPO)
               for i in range(args.workers)]
    codes = [w.wait() for w in workers]
    if any(codes):
        raise SystemExit(f"a worker failed (exit codes {codes}); rerun: what is cached is kept")


if __name__ == "__main__":
    main()
