"""Shared by the benchmarks (``bench``) and the experiments (``experiments``): in-process
tuning of a few tasks, provenance, results."""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import shlex
import shutil
import statistics
import sys
import tempfile
from typing import Any, Callable, NamedTuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Timing windows per runtime, and alternating rounds they are spread over, of the
#: benchmarks that time whole networks side by side. More than ``tune.py``'s 10 over 5: on
#: the 2-core EPYC the same builds moved 10-30 % between 10-window timings (regnet_y_400mf's
#: default and xgb builds swapped order, docs/bench/runs/tuning-speed/llvm-znver4/NOTES.md).
BENCH_WINDOWS = 30
BENCH_ROUNDS = 10

# No benchmark reads or adds to this machine's tuning memory unless it names one
# (memory.path=..., as bench.memory_reuse does): every tune.py it starts inherits this, and
# the torch.compile backend it runs reads no memory either, so that every method, seed and
# budget starts from the same state (docs/memory.md).
os.environ["METATUNE_MEMORY"] = "off"


def in_repo(path: str) -> str:
    """``path`` as the benchmarks read it: relative to the repository root (where they run,
    ``python -m bench.<name>``), an absolute path unchanged."""
    return os.path.join(REPO, path)


def network_args(network: str) -> list[str]:
    """``tune.py``'s flags for a built-in network name (``--network``) or a
    ``module:callable`` spec (``--model``)."""
    return ["--model", network] if ":" in network else ["--network", network]


def show_slow_steps() -> None:
    """Log warnings, and the progress of the one slow step a benchmark's first run may take:
    building xgb-Xfer's base model (about 10 minutes on 2 cores, cached in ``work/cache``
    afterwards), which was silent at the default log level."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("tuner.models.xgb_transfer").setLevel(logging.INFO)


class Tuned(NamedTuple):
    """What :func:`tune_tasks` returns."""

    outcome: Any  #: the :class:`tuner.app.tuning.TuningOutcome`
    rounds: list[dict]  #: ``rounds.jsonl`` rows (none when no round ran)
    curves: list[dict]  #: ``curves.jsonl`` rows
    cfg: Any  #: the :class:`tuner.app.config.TuneConfig` that tuned, model sources named


def tune_tasks(tasks: list, overrides: list[str], prefix: str = "bench-") -> Tuned:
    """Tune ``tasks`` on the local CPU with ``tune.py``'s own loop (:func:`tuner.app.tuning.tune`)
    in a fresh temporary work dir, removed afterwards (kept if tuning raises).

    Args:
        tasks: :class:`tuner.engine.tasks.TaskInfo` list.
        overrides: Tune config overrides (preset, trials, trials_per_round, seed, ...).
        prefix: Prefix of the temporary work dir's name.

    Returns:
        The outcome, the work dir's rounds and curves, and the configuration with the
        checkpoint and xgb-Xfer data it used named (:func:`with_model_sources`).
    """
    from tvm.s_tir import meta_schedule as ms

    from tuner.app.config import load_tune_config
    from tuner.app.monitor import read_curves
    from tuner.app.preflight import with_model_sources
    from tuner.app.tuning import tune
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.targets import resolve_target

    info = resolve_target("llvm")
    load_tensor_intrinsics(("llvm",))
    work_dir = tempfile.mkdtemp(prefix=prefix)
    cfg = with_model_sources(load_tune_config(overrides=[
        f"work_dir={work_dir}", "progress=false", "tensorboard=false", "log_level=WARNING",
        *overrides]), info)
    try:
        outcome = tune(tasks, target_info=info, cfg=cfg, work_dir=work_dir,
                       database=ms.database.JSONDatabase(work_dir=work_dir))
    except BaseException:
        print(f"tuning failed; its work dir (logs, database) is kept: {work_dir}",
              file=sys.stderr)
        raise
    path = os.path.join(work_dir, "rounds.jsonl")
    rounds = []
    if os.path.exists(path):  # no round at all when the search proposed nothing
        with open(path, encoding="utf-8") as f:
            rounds = [json.loads(line) for line in f]
    curves = read_curves(work_dir)
    shutil.rmtree(work_dir, ignore_errors=True)
    return Tuned(outcome, rounds, curves, cfg)


def tune_one_task(network: str, task_name: str, preset: str | None, seed: int, trials: int,
                  batch: int, overrides: list[str], layout: str | None = None) -> dict:
    """Tune one task of a built-in network with :func:`tune_tasks`.

    Args:
        network: A built-in network name, or a ``module:callable`` model spec
            (``tests.models:one_conv``).
        task_name: The task, as ``tune.py`` lists it.
        preset: A preset name (``xgb``, ``xgb-Xfer``, ``RL``, ``meta-BO``, ``meta-BO-T``, ...);
            ``None``: ``tune.py``'s defaults (no preset).
        seed: Tuning seed.
        trials: Trials to measure.
        batch: Trials per round.
        overrides: More tune config overrides.
        layout: Extract the tasks in this layout (``NHWC``, as ``tune.py`` does by default,
            or ``NCHW``), recorded as ``layout``; ``None``: the extraction's default, NCHW,
            the layout the datasets' generated workloads are in.

    Returns:
        ``preset``, ``seed``, ``task``, ``best_ms``, ``tuning_seconds``, ``trials``,
        ``rounds`` (``rounds.jsonl`` rows), ``curve`` (``[trial, best ms so far]``), and
        where it ran: ``platform`` (e.g. ``llvm-znver4``), ``target`` (its description),
        ``machine`` (:func:`metatune.provenance.machine_info`), ``runtime`` (TVM and
        PyTorch threads, :func:`tuner.engine.runtime.runtime_info`) and ``code`` (the git
        commit, :func:`metatune.provenance.code_version`); ``layout`` when given; and
        what the cost model was trained on: ``checkpoint`` (the MetaTune cost model) or
        ``xfer_data`` (xgb-Xfer).
    """
    from metatune.provenance import code_version, machine_info
    from tuner.engine.networks import load_network
    from tuner.engine.platforms import platform_id
    from tuner.engine.runtime import runtime_info
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    info = resolve_target("llvm")
    net = load_network(model_spec=network) if ":" in network else load_network(network)
    tasks = extract_tasks(net.relax_mod, info.target,
                          Lowering() if layout is None else Lowering(layout=layout))
    matching = [t for t in tasks if t.name == task_name]
    if not matching:
        raise SystemExit(f"{network} has no task {task_name!r}; its tasks: "
                         + ", ".join(t.name for t in tasks))
    outcome, rounds, curves, cfg = tune_tasks(matching, [
        *([f"preset={preset}"] if preset else []), *([f"layout={layout}"] if layout else []),
        f"trials={trials}", f"trials_per_round={batch}", f"seed={seed}", *overrides],
        prefix=f"bench-{preset or 'default'}-")
    curve = [[c["trial"], c["task_best_ms"]] for c in curves]
    sources = {"checkpoint": cfg.metatune.checkpoint if cfg.cost_model == "metatune" else None,
               "xfer_data": cfg.xfer.data if cfg.cost_model == "xgb-xfer" else None}
    ensemble = cfg.metatune.ensemble if cfg.cost_model == "metatune" else None
    return {"preset": preset, "seed": seed, "task": f"{network}/{task_name}",
            "best_ms": outcome.best_ms[0], "tuning_seconds": outcome.tuning_seconds,
            "trials": outcome.trials_run, "rounds": rounds, "curve": curve,
            "platform": platform_id(info.target), "target": info.description,
            "machine": machine_info(), "runtime": runtime_info(info.num_cores),
            "code": code_version(), **({"layout": layout} if layout else {}),
            **{k: repo_relative(v) for k, v in {**sources, "ensemble": ensemble}.items() if v}}


def named_overrides(specs: list[str], flag: str) -> list[tuple[str, list[str]]]:
    """``NAME=OVERRIDES`` command-line specs as ``(name, [override, ...])`` pairs.

    Raises:
        SystemExit: A spec without a name or ``=``, named after ``flag``.
    """
    out = []
    for spec in specs:
        name, sep, overrides = spec.partition("=")
        if not sep or not name:
            raise SystemExit(f"{flag} {spec!r}: give NAME=OVERRIDES (OVERRIDES may be empty)")
        out.append((name, shlex.split(overrides)))
    return out


def repo_relative(paths: str | list[str]) -> str | list[str]:
    """A path, or each of a list of them (xgb-Xfer's splits, an ensemble's checkpoints), as
    committed files write them (:func:`metatune.config.repo_relative`)."""
    from metatune.config import repo_relative as one

    return one(paths) if isinstance(paths, str) else [one(p) for p in paths]


def measure(mods: list, info, runner: dict) -> list[float | None]:
    """Build and time scheduled modules as tuning does; mean seconds (``None``: failed).

    Args:
        mods: Scheduled task ``IRModule``s.
        info: The :class:`tuner.engine.targets.TargetInfo`.
        runner: ``tuner.app.config.RunnerConfig`` fields (timing settings, cache flush).
    """
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.builder import BuilderInput
    from tvm.s_tir.meta_schedule.runner import RunnerInput

    from metatune.records import measured_seconds
    from tuner.app.config import RunnerConfig
    from tuner.app.factories import make_runner
    from tuner.engine.builder import PersistentBuilder

    builder = PersistentBuilder(max_workers=info.num_cores, timeout_sec=120,
                                target_kinds=(info.kind,))
    pool = make_runner(RunnerConfig(**runner), (info.kind,), info.num_cores)
    try:
        built = builder.build([BuilderInput(m, info.target) for m in mods])
        out: list[float | None] = [None] * len(mods)
        inputs, where = [], []
        for i, (b, m) in enumerate(zip(built, mods, strict=False)):
            if b.error_msg is None:
                inputs.append(RunnerInput(b.artifact_path, info.device_type,
                                          ArgInfo.from_entry_func(m, remove_preproc=True)))
                where.append(i)
        for i, fut in zip(where, pool.run(inputs), strict=False):
            res = fut.result()
            out[i] = measured_seconds(res.run_secs, res.error_msg)
        return out
    finally:
        builder.shutdown()
        pool.pool.shutdown()


def provenance(module: str) -> dict:
    """``command``, ``date``, ``machine`` (one line: CPU, vector flags, cores, the local
    target, TVM and PyTorch threads, TVM version), ``target`` and ``runtime`` (the thread
    counts, read from this process's runtime) of this benchmark run, for its JSON and page.

    Args:
        module: The module run, e.g. ``bench.model_accuracy`` (``python -m`` runs it).
    """
    from metatune.provenance import machine_info
    from tuner.engine.runtime import runtime_info
    from tuner.engine.targets import resolve_target

    m = machine_info()
    target = resolve_target("llvm")
    rt = runtime_info(target.num_cores)
    flags = ",".join(m["cpu_flags"]) or "no vector flags read"
    return {"command": f"python -m {module} " + shlex.join(sys.argv[1:]), "date": m["date"],
            "machine": f"{m['cpu']} ({flags}), {m['cores']} cores; target "
                       f"`{target.description}`; TVM {rt['tvm_threads']} / PyTorch "
                       f"{rt['torch_threads']} threads; TVM {m['tvm']}",
            "target": target.description, "runtime": rt}


def cpu_tag(record: dict) -> str:
    """The ``-mcpu`` of the record's target (``llvm -mcpu=rocketlake (2 cores)`` ->
    ``rocketlake``): which of the page's machines ran it."""
    for word in record["target"].split():
        if word.startswith("-mcpu="):
            return word[len("-mcpu="):]
    return record["target"].split()[0]


#: :func:`machine_lines`' warning when the records come from several machines.
SEVERAL_MACHINES = ("- **Several machines**: compare latencies only within one run (one seed "
                    "of one row); the ratios are each taken within their own run.")


def machine_lines(records: list[dict], several: str = SEVERAL_MACHINES) -> list[str]:
    """One markdown line per machine (CPU, flags, target, TVM / PyTorch threads) that the
    records (a report's ``machine``, ``runtime`` and ``target``) were run on, named by its
    ``-mcpu`` as the tables name it; one line counts the records that do not say (made
    before they carried it), and ``several`` follows when there is more than one machine."""
    known = [r for r in records
             if isinstance(r.get("machine"), dict) and isinstance(r.get("runtime"), dict)]
    machines = sorted({(cpu_tag(r), r["machine"]["cpu"],
                        ",".join(r["machine"].get("cpu_flags", [])),
                        r["target"], f"TVM {r['runtime']['tvm_threads']} / PyTorch "
                        f"{r['runtime']['torch_threads']} threads") for r in known})
    lines = [f"- `{tag}`: {cpu} (flags: {flags or '?'}); target `{target}`; {threads}."
             for tag, cpu, flags, target, threads in machines]
    if len(known) < len(records):
        lines.append(f"- machine not recorded: {len(records) - len(known)} records (made "
                     "before they carried it)")
    if len(machines) > 1:
        lines.append(several)
    return lines


def run_command(prov: dict) -> str:
    """The command that measures a resumable page's records: its ``--report-only`` dropped
    (that flag only rewrites the page from them)."""
    return prov["command"].replace(" --report-only", "")


def recorded_run(path: str, label: str, make: Callable[[], dict]) -> dict:
    """A benchmark run's record: read from ``path`` when an earlier run wrote it (resume),
    else made by ``make``, stamped with its UTC ``date`` and written whole first
    (``label``: the progress line printed before making it)."""
    if not os.path.exists(path):
        print(label, flush=True)
        run = make()
        run["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds")
        write_json_atomic(path, run)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def measured_span(runs: list[dict]) -> list[str] | None:
    """The first and last ``date`` of the runs (``None`` when none has one)."""
    dates = [r["date"] for r in runs if r.get("date")]
    return [min(dates), max(dates)] if dates else None


def write_json_atomic(path: str, obj: Any) -> None:
    """:func:`metatune.files.write_json_atomic` (a benchmark's run record: whole or absent)."""
    from metatune.files import write_json_atomic as write

    write(path, obj)


def write_results(json_path: str, md_path: str, doc: dict, text: str,
                  rows_key: str | None = None) -> None:
    """Write a benchmark's JSON and markdown page, and print the page.

    Args:
        json_path: Where the JSON goes.
        md_path: Where the markdown page goes.
        doc: The JSON document.
        text: The markdown page.
        rows_key: A key of ``doc`` holding a long list, written one entry per line.
    """
    os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
    with open(json_path, "w", encoding="utf-8") as f:
        if rows_key is None:
            json.dump(doc, f, indent=1)
        else:
            rest = {k: v for k, v in doc.items() if k != rows_key}
            head = json.dumps(rest, indent=1)[:-1].rstrip() + ("," if rest else "")
            rows = ",\n".join("  " + json.dumps(r) for r in doc[rows_key])
            f.write(f'{head}\n "{rows_key}": [\n{rows}\n ]\n}}\n')
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


def geomean(values: list[float | None]) -> float | None:
    """The geometric mean of the positive values, or ``None`` for none."""
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def median(values: list[float]) -> float | None:
    """The median, or ``None`` for no values."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
