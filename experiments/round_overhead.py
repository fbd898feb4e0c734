# Last ran on commit 330c685
"""Where the default search's and model update's seconds go in a tuning round, and whether a
change keeps the chosen candidates.

Rounds of ``tune.py``'s default search (the MetaTune ensemble + ``bo``) on resnet-18's 3x3
conv (NHWC, as ``tune.py`` extracts it), with no build and no run: each candidate's run time
is made up from its structural hash, the same in every process. Each part is timed on its
own (wall and this process's CPU seconds, children's time taken out of their callers'):
TVM's evolutionary sampler, graph encoding, the GCN, the cost model's other work, hashing,
the GP fit and the rest of the batch choice, knob vectors, fine-tuning. Each variant runs in
a fresh process, variants alternating when repeated.

The sampler runs on one TVM thread (``--sampler-threads 1``): on two, the same code in two
processes draws different pools (threads race for the work), so chosen batches could not be
compared. On one, every variant sees the same first pool, and a change that keeps the
choices keeps every later round's pool too.

    python -m experiments.round_overhead --torch-threads 1 0 --rounds 6 \\
        --out docs/lab/search/round-overhead

``--tune THREADS ARGS`` runs ``tune.py ARGS`` instead, with the tuner's PyTorch threads set
(``docs/lab/search/round-overhead-network.md``):

    python -m experiments.round_overhead --tune 0 --network resnet-18 --trials 48 \\
        --work-dir /tmp/r18-before evaluate.enabled=false --no-memory
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench.common import REPO, provenance, write_results

TASK = "fused_conv2d1_add1_relu11"
#: (owner, attribute, part) timed in the worker; owners are resolved there.
PARTS = (("tuner.search.bo:BatchBOSearch._cls", "generate_measure_candidates", "bo, other"),
         ("tuner.search.bo:BatchBOSearch._cls", "_pool", "sampler (TVM)"),
         ("tuner.models.ensemble:EnsembleCostModel._cls", "predict", "predict, other"),
         ("tuner.models.ensemble:EnsembleCostModel._cls", "update", "update, other"),
         ("tuner.models.cost_model", "encode", "encode"),
         ("metatune.model:MetaTuneNet", "embed", "GCN"),
         ("tvm_ffi", "structural_hash", "hash"),
         ("tuner.search.bo", "select_batch", "select, other"),
         ("tuner.search.bo_select", "fit_gp", "GP fit"),
         ("tuner.search.knobs:KnobSpace", "matrix", "knobs"),
         ("metatune.maml:InnerLoop", "adapt", "adapt"))


class Clock:
    """Exclusive wall and CPU seconds per part of the current round."""

    def __init__(self) -> None:
        self.parts: dict[str, list[float]] = {}
        self.stack: list[list[float]] = []

    def wrap(self, owner, attr: str, part: str) -> None:
        inner = getattr(owner, attr)

        def timed(*args, **kwargs):
            self.stack.append([0.0, 0.0])
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                dw, dc = time.perf_counter() - wall, time.process_time() - cpu
                child = self.stack.pop()
                mine = self.parts.setdefault(part, [0.0, 0.0])
                mine[0] += dw - child[0]
                mine[1] += dc - child[1]
                if self.stack:
                    self.stack[-1][0] += dw
                    self.stack[-1][1] += dc

        setattr(owner, attr, timed)

    def take(self) -> dict[str, list[float]]:
        out, self.parts = {k: [round(w, 4), round(c, 4)] for k, (w, c) in self.parts.items()}, {}
        return out


def _owner(spec: str):
    import importlib

    module, _, path = spec.partition(":")
    obj = importlib.import_module(module)
    for name in filter(None, path.split(".")):
        obj = getattr(obj, name)
    return obj


def worker(torch_threads: int, sampler_threads: int, rounds: int, batch: int,
           overrides: list[str], out: str) -> None:
    """Run the rounds in this (fresh) process and write them to ``out``."""
    import resource

    import torch
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    import metatune.threads
    from tuner.app.config import load_tune_config
    from tuner.app.factories import make_search
    from tuner.app.session import build_cost_model, make_contexts
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.networks import load_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    # 0: PyTorch's own count inside the tuner's learned parts (as before metatune.threads)
    metatune.threads.TUNER_THREADS = torch_threads or torch.get_num_threads()
    hash_of = tvm_ffi.structural_hash  # the made-up run times' own hashing is not timed
    clock = Clock()
    for owner, attr, part in PARTS:
        clock.wrap(_owner(owner), attr, part)
    cfg = load_tune_config(overrides=["memory.enabled=false", *overrides])
    info = resolve_target("llvm")
    load_tensor_intrinsics(("llvm",))
    task = next(t for t in extract_tasks(load_network("resnet-18").relax_mod, info.target,
                                         Lowering(layout="NHWC")) if t.name == TASK)
    model = build_cost_model(cfg, info)
    search = make_search(cfg.search, cfg.search_params, seed=cfg.seed, device=cfg.device)
    ctx = make_contexts([task], target=info.target, search=search,
                        work_dir=os.path.dirname(out), seed=cfg.seed,  # its logs: a temp dir
                        num_threads=sampler_threads)[0]
    db = ms.database.MemoryDatabase()
    ctx.pre_tuning(max_trials=rounds * batch, num_trials_per_iter=batch,
                   design_spaces=ctx.space_generator.generate_design_space(ctx.mod),
                   database=db, cost_model=model)
    workload = db.commit_workload(ctx.mod)
    clock.take()

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    rows = []
    for r in range(rounds):
        wall, c = time.perf_counter(), cpu()
        cands = list(ctx.generate_measure_candidates() or [])
        search_s, search_cpu = time.perf_counter() - wall, cpu() - c
        hashes = [hash_of(x.sch.mod) for x in cands]
        secs = [1e-3 * (1 + (h % 997) / 997) for h in hashes]
        results = [ms.runner.RunnerResult([s], None) for s in secs]
        for x, s in zip(cands, secs, strict=True):
            db.commit_tuning_record(ms.database.TuningRecord(x.sch.trace, workload, [s],
                                                             info.target, x.args_info))
        wall, c = time.perf_counter(), cpu()
        model.update(ctx, cands, results)
        update_s, update_cpu = time.perf_counter() - wall, cpu() - c
        ctx.notify_runner_results(cands, results)
        rows.append({"round": r, "search_s": round(search_s, 4), "search_cpu": round(search_cpu, 4),
                     "update_s": round(update_s, 4), "update_cpu": round(update_cpu, 4),
                     "parts": clock.take(), "chosen": [str(h) for h in hashes]})
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "chosen"}), flush=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(rows, f)


def tune_with_threads(threads: int, tune_args: list[str]) -> int:
    """``tune.py`` with ``tune_args``, the tuner's PyTorch threads set to ``threads`` (0:
    PyTorch's own count); its exit code."""
    import runpy

    import torch

    import metatune.threads

    metatune.threads.TUNER_THREADS = threads or torch.get_num_threads()
    sys.argv = [os.path.join(REPO, "tune.py"), *tune_args]
    try:  # run as the entry point it is (nothing imports it)
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else int(done.code is not None)
    return 0


def _median(rows: list[dict], key) -> float:
    return statistics.median(key(r) for r in rows) if rows else float("nan")


def page(doc: dict) -> str:
    """The markdown page of the runs."""
    runs = doc["runs"]
    first = runs[0]
    lines = [
        "# A default tuning round's search and model update, part by part",
        "",
        f"- command: `{doc['command']}`",
        f"- date: {doc['date']}; code: {doc['code']}",
        f"- machine: {doc['machine']}; other jobs may have run beside it (wall seconds then "
        "under load, CPU seconds less so)",
        f"- task: resnet-18 `{TASK}` (NHWC), {doc['rounds']} rounds of {doc['batch']}, "
        f"TVM's sampler on {doc['sampler_threads']} thread(s); run times made up from each "
        "candidate's hash (no build, no run)",
        "- torch threads: the PyTorch threads inside the cost model, its fine-tuning and the "
        "GP (`metatune.threads`); 0 = PyTorch's own count, as before that module",
        "- per round: medians over rounds after the first; parts are exclusive (a part's "
        "callees are their own rows)",
        "",
        "| torch threads | search s | search CPU s | update s | update CPU s | "
        "rounds choosing the first run's batch |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        later = run["rows"][1:]
        same = sum(a["chosen"] == b["chosen"] for a, b in zip(run["rows"], first["rows"],
                                                              strict=False))
        lines.append(f"| {run['torch_threads']} | {_median(later, lambda r: r['search_s']):.3f} | "
                     f"{_median(later, lambda r: r['search_cpu']):.3f} | "
                     f"{_median(later, lambda r: r['update_s']):.3f} | "
                     f"{_median(later, lambda r: r['update_cpu']):.3f} | "
                     f"{same} of {len(run['rows'])} |")
    parts = sorted({p for run in runs for r in run["rows"] for p in r["parts"]})
    lines += ["", "Parts per round, wall / CPU seconds (median over rounds after the first):",
              "", "| part | " + " | ".join(f"threads {r['torch_threads']}" for r in runs) + " |",
              "|---|" + "---|" * len(runs)]
    for p in parts:
        cells = []
        for run in runs:
            later = run["rows"][1:]
            cells.append(f"{_median(later, lambda r, p=p: r['parts'].get(p, [0, 0])[0]):.3f} / "
                         f"{_median(later, lambda r, p=p: r['parts'].get(p, [0, 0])[1]):.3f}")
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--torch-threads", type=int, nargs="+", default=[1, 0],
                   help="PyTorch threads of the tuner's learned parts per variant "
                        "(0: PyTorch's own count)")
    p.add_argument("--sampler-threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--override", action="append", default=[],
                   help="a tune config override for every variant (repeatable)")
    p.add_argument("--out", default="docs/lab/search/round-overhead",
                   help="page and JSON path without extension")
    p.add_argument("--worker", nargs=2, metavar=("THREADS", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--tune", nargs=argparse.REMAINDER, metavar="THREADS ARGS",
                   help="instead: run tune.py with ARGS, the tuner's PyTorch threads set to "
                        "THREADS (0: PyTorch's own count, as before metatune.threads)")
    args = p.parse_args(argv)
    if args.tune:
        sys.exit(tune_with_threads(int(args.tune[0]), args.tune[1:]))
    if args.worker:
        worker(int(args.worker[0]), args.sampler_threads, args.rounds, args.batch,
               args.override, args.worker[1])
        return
    prov = provenance("experiments.round_overhead")
    runs = []
    with tempfile.TemporaryDirectory(prefix="round-overhead-") as tmp:
        for rep in range(args.repeats):
            for n in args.torch_threads:
                out = os.path.join(tmp, f"{n}-{rep}.json")
                cmd = [sys.executable, "-m", "experiments.round_overhead", "--worker", str(n), out,
                       "--sampler-threads", str(args.sampler_threads), "--rounds",
                       str(args.rounds), "--batch", str(args.batch),
                       *[a for o in args.override for a in ("--override", o)]]
                subprocess.run(cmd, cwd=REPO, check=True)
                with open(out, encoding="utf-8") as f:
                    runs.append({"torch_threads": n, "repeat": rep, "rows": json.load(f)})
    from metatune.provenance import code_version

    doc = {**prov, "code": code_version(), "task": TASK, "rounds": args.rounds, "batch": args.batch,
           "sampler_threads": args.sampler_threads, "overrides": args.override, "runs": runs}
    write_results(args.out + ".json", args.out + ".md", doc, page(doc))


if __name__ == "__main__":
    main()
