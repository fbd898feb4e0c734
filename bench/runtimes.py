"""The runtimes users deploy on, side by side: the tuned TVM build against PyTorch eager,
torch.compile (inductor), ONNX Runtime and OpenVINO, on the same CPU with the same threads.

For each network and budget, ``tune.py`` (default preset) tunes a work dir
(``<work-root>/<network>-<budget>``; an interrupted run resumes it), then this process
builds the tuned network from the work dir's schedules (as ``export.py`` does), makes every
runtime from the same weights (the network as ``tune.py`` imports it: torchvision, weights
seeded, batch norm folded) and times them all on the same float32 input (an NCHW image;
``bert-tiny``: token embeddings), in
alternating rounds (:func:`tuner.engine.timing.interleaved`), each output checked against
PyTorch eager. OpenVINO runs twice: in f32 and in its default precision (bf16 on CPUs that
have it: a lower precision, reported apart). ``--precision bf16`` tunes the network with
``tune.py --precision bf16`` instead (work dir ``<network>-<budget>-bf16``, docs/precision.md)
and compares its build with OpenVINO's bf16.

A network and budget whose record exists (``docs/bench/runs/runtimes/<platform>/``) is not
measured again; the page (``docs/bench/runtimes.md`` and ``.json``) shows every record.

Examples:
    python -m bench.runtimes                       # tune.py's default budget (128 trials)
    python -m bench.runtimes --budgets 2048        # the long run
    python -m bench.runtimes --networks alexnet --budgets 16
    python -m bench.runtimes --report-only         # rewrite the page from the records
    python -m bench.runtimes --retime              # time the tuned work dirs again
    python -m bench.runtimes --precision bf16 --networks resnet-18   # bf16 against bf16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from bench.common import (
    BENCH_ROUNDS,
    BENCH_WINDOWS,
    REPO,
    in_repo,
    machine_lines,
    measured_span,
    network_args,
    provenance,
    recorded_run,
    run_command,
    write_results,
)

NETWORKS = ("alexnet", "resnet-18", "mobilenet-v2", "squeezenet", "vgg-16", "convnext-atto",
            "bert-tiny")
RUNS = "docs/bench/runs/runtimes"
OUT = "docs/bench/runtimes"
#: Every runtime of a record, in timing order, and its column name.
LABELS = {"tvm_tuned": "TVM tuned", "torch": "PyTorch eager", "torch_compile": "torch.compile",
          "metatune_compile": "torch.compile metatune", "metatune_load": "metatune.load",
          "onnxruntime": "ONNX Runtime", "openvino_f32": "OpenVINO f32",
          "openvino_default": "OpenVINO default"}
#: The runtimes that compute in float32 (the fastest of them is the page's winner).
F32 = ("tvm_tuned", "torch", "torch_compile", "metatune_compile", "metatune_load",
       "onnxruntime", "openvino_f32")
#: ``tune.py``'s precision -> the name the records use for it (OpenVINO's spelling).
PRECISION_NAMES = {"fp32": "f32", "bf16": "bf16"}


def run_name(network: str, budget: int, precision: str = "fp32") -> str:
    """The name of a network, budget and precision's work dir and record."""
    return f"{network}-{budget}" + ("" if precision == "fp32" else f"-{precision}")


def record_path(runs: str, platform: str, network: str, budget: int,
                precision: str = "fp32") -> str:
    """Where one network, budget and precision's record goes."""
    return os.path.join(runs, platform, run_name(network, budget, precision) + ".json")


def tune_work_dir(network: str, budget: int, work_dir: str, extra: list[str]) -> dict:
    """Tune (or resume) ``work_dir`` to ``budget`` trials with ``tune.py`` (its evaluation
    off: this benchmark times the build itself); the work dir's ``report.json``. A
    ``module:callable`` ``network`` is passed as ``--model``, a name as ``--network``."""
    cmd = [sys.executable, os.path.join(REPO, "tune.py"), *network_args(network),
           "--trials", str(budget), "--work-dir", work_dir, "evaluate.enabled=false",
           "progress=false", "tensorboard=false", *extra]
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)
    with open(os.path.join(work_dir, "report.json"), encoding="utf-8") as f:
        return json.load(f)


def tuned_build(work_dir: str, report: dict):
    """The work dir's network, imported as ``tune.py`` imported it, and its tuned build
    (measured schedules, then predicted ones), loaded with TVM's threads set to the
    tuning's ``num_cores``.

    Returns:
        ``(network, compiled network, num_cores)``.
    """
    from tuner.app.export import build_target, read_work_dir
    from tuner.engine.database import open_database
    from tuner.engine.evaluate import compile_network
    from tuner.engine.networks import load_network
    from tuner.engine.runtime import configure_tvm_threads
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering
    from tuner.search.zero_shot import with_predictions

    config = report["config"]
    _, settings, _ = read_work_dir(work_dir)
    target, device_type = build_target(config, work_dir)
    num_cores = resolve_target(str(config.get("target") or "llvm"),
                               config.get("num_cores")).num_cores
    configure_tvm_threads(num_cores)
    network = load_network(config.get("network"), batch=int(config.get("batch") or 1),
                           fold_bn=bool(config.get("fold_bn", True)))
    lowering = Lowering(pack_weights=bool(config.get("pack_weights", True)),
                        layout=str(config.get("layout") or settings.get("layout") or "NCHW"),
                        precision=str(config.get("precision") or "fp32"))
    database = with_predictions(open_database(work_dir), work_dir)
    return network, compile_network(network.relax_mod, target, database, device_type,
                                    lowering), num_cores


def metatune_runtimes(module, x, work_dir: str, failures: dict[str, str]) -> dict:
    """The tuned network as a PyTorch user calls it: ``torch.compile(backend="metatune")``
    with the work dir's database, and the work dir exported (``export.py``) and loaded with
    ``metatune.load``; each taking and returning torch tensors. A runtime that fails is
    named in ``failures`` with its one-line error and left out."""
    import torch

    import metatune
    from bench.runtime_timers import Runtime
    from metatune.errors import one_line
    from tuner.app.export import ExportConfig, run_export
    from tuner.engine.runtime import tvm_num_threads
    from tuner.engine.timing import window_timer

    xt = torch.from_numpy(x)
    out = {}

    def add(name: str, run) -> None:
        def call():
            with torch.inference_mode():
                return run(xt)

        try:  # a runtime that fails is reported on the page, not fatal
            out[name] = Runtime(window_timer(call), call().numpy(), tvm_num_threads())
        except Exception as err:
            failures[name] = one_line(str(err))

    add("metatune_compile", torch.compile(module, backend="metatune",
                                          options={"work_dir": work_dir}))
    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        try:
            path, _ = run_export(ExportConfig(work_dir=work_dir,
                                              out=os.path.join(tmp, "net.metatune")))
            add("metatune_load", metatune.load(path))
        except Exception as err:
            failures["metatune_load"] = one_line(str(err))
    return out


def measure(network: str, budget: int, work_root: str, extra: list[str],
            timing: dict[str, Any], command: str, precision: str = "fp32",
            quiet_wait_minutes: float = 10.0) -> dict:
    """Tune ``network`` to ``budget`` trials, then time every runtime side by side.

    Args:
        network: A built-in network name.
        budget: Trials.
        work_root: Folder of the work dirs.
        extra: More ``tune.py`` overrides.
        timing: :func:`bench.runtime_timers.time_side_by_side`'s ``windows``,
            ``min_window_ms`` and ``rounds``.
        command: The command measuring it (recorded).
        precision: ``tune.py``'s ``precision`` (``fp32`` or ``bf16``).
        quiet_wait_minutes: How long to wait, before timing, for other processes to leave
            the cores (:func:`bench.machine_load.wait_until_quiet`; then timed anyway, and
            the record's ``machine_load`` says how loaded).

    Returns:
        The record (without its ``date``: :func:`bench.common.recorded_run` stamps it).
    """
    from bench.machine_load import quiet_timing
    from bench.runtime_timers import Runtime, deploy_runtimes, time_side_by_side, versions
    from metatune.provenance import code_version, machine_info
    from tuner.engine.platforms import platform_id
    from tuner.engine.runtime import configure_tvm_threads, runtime_info, tvm_num_threads
    from tuner.engine.targets import resolve_target

    work_dir = os.path.join(work_root, run_name(network, budget, precision))
    report = tune_work_dir(network, budget, work_dir, [*extra, f"precision={precision}"])
    net, compiled, threads = tuned_build(work_dir, report)
    x = net.example_input()
    failures: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-runtimes-") as onnx_dir:
        others = deploy_runtimes(net.torch_module, x, threads, onnx_dir, failures=failures)
    if "torch" not in others:
        raise RuntimeError(f"PyTorch eager, the reference, failed: {failures['torch']}")
    ours = metatune_runtimes(net.torch_module, x, work_dir, failures)
    configure_tvm_threads(threads)  # the backend's compile sized TVM's pool for its target
    ours_precision = PRECISION_NAMES[precision]
    runtimes = {"tvm_tuned": Runtime(compiled.timer(x), compiled.run(x), tvm_num_threads(),
                                     ours_precision),
                **{name: rt._replace(threads=tvm_num_threads(), precision=ours_precision)
                   for name, rt in ours.items()},
                **others}
    with quiet_timing(60 * quiet_wait_minutes) as loads:
        print(f"timing {', '.join(runtimes)} side by side ({threads} threads each)",
              flush=True)
        side = time_side_by_side(runtimes, others["torch"].output, **timing)
    tasks = report.get("tasks") or []
    return {
        "network": network, "budget": budget, "tuned_precision": precision,
        "input_shape": list(net.input_shape),
        "notes": net.notes, "preset": report.get("preset"),
        "trials_total": report.get("trials_total"), "tuning_seconds": report.get(
            "tuning_seconds"), "resumed": report.get("trials_run") != report.get("trials_total"),
        "tasks": {k: sum(t.get("schedule") == k for t in tasks)
                  for k in ("measured", "predicted", "default")},
        "num_cores": threads, **side, "failures": failures,
        **loads,
        "platform": platform_id(resolve_target("llvm").target),
        "target": report["target"], "machine": machine_info(), "runtime": runtime_info(threads),
        "versions": versions(), "code": code_version(),
        "onnx": {"exporter": "torch.onnx.export (TorchScript, dynamo=False)",
                 "read_by": ["onnxruntime", "openvino_f32", "openvino_default"]},
        "command": command,
    }


def load_records(runs: str) -> list[dict]:
    """Every record under ``runs`` (all platforms), by platform, network and budget."""
    out = []
    for platform in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        folder = os.path.join(runs, platform)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.endswith(".json"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    out.append(json.load(f))
    order = {n: i for i, n in enumerate(NETWORKS)}
    return sorted(out, key=lambda r: (r["platform"], order.get(r["network"], len(order)),
                                      r["network"], r.get("tuned_precision", "fp32") != "fp32",
                                      r["budget"]))


def _ms(value: float | None) -> str:
    return "-" if value is None else (f"{value:.2f}" if value < 10 else f"{value:.1f}")


def _cell(rec: dict, name: str) -> str:
    """``ms (fraction of PyTorch eager)``, the precision added where it is not f32."""
    lat = rec["latency_ms"].get(name)
    if lat is None:
        return "failed" if name in rec.get("failures", {}) else "-"
    frac = f"{lat / rec['latency_ms']['torch']:.2f}x"
    prec = _precision(rec, name)
    return f"{_ms(lat)} ({frac}{'' if prec == 'f32' else ', ' + prec})"


def _precision(rec: dict, name: str) -> str:
    """The precision a runtime of the record ran in (``f32`` where not recorded)."""
    return rec.get("precision", {}).get(name, "f32")


def _trials(rec: dict) -> str:
    """The record's trials cell: the budget, and the tuned precision where not fp32."""
    tuned = rec.get("tuned_precision", "fp32")
    return f"{rec['budget']}" + ("" if tuned == "fp32" else f" ({tuned})")


def _loaded(rec: dict) -> str:
    """`` *`` where other processes took more than 10 % of the cores while the record was
    timed (its milliseconds are not clean; the ratios, side by side, still compare)."""
    return " *" if (rec.get("machine_load") or {}).get("loaded") else ""


def fastest_f32(rec: dict) -> str | None:
    """The fastest float32 runtime of the record."""
    lat = {n: rec["latency_ms"][n] for n in F32
           if rec["latency_ms"].get(n) is not None and _precision(rec, n) == "f32"}
    return min(lat, key=lat.get) if lat else None


def rivals_of(rec: dict) -> tuple[str, ...]:
    """The runtimes the tuned build must match: ONNX Runtime and OpenVINO f32 for an f32
    build; OpenVINO's default for a bf16 build, where that ran in bf16 too."""
    tuned = _precision(rec, "tvm_tuned")
    if tuned == "f32":
        return ("onnxruntime", "openvino_f32")
    return ("openvino_default",) if _precision(rec, "openvino_default") == tuned else ()


def verdict(rec: dict) -> tuple[bool | None, str]:
    """Whether the tuned build is at or below the faster of its rivals (:func:`rivals_of`),
    and a sentence saying so with the numbers (``None``: none of them was timed)."""
    lat = rec["latency_ms"]
    rivals = {n: lat[n] for n in rivals_of(rec) if lat.get(n) is not None}
    if lat.get("tvm_tuned") is None or not rivals:
        return None, "not compared (the tuned build or its rivals were not timed)"
    best = min(rivals, key=rivals.get)
    ratio = lat["tvm_tuned"] / rivals[best]
    fastest = _fastest_windows(rec, ("tvm_tuned", *rivals))
    if fastest:
        top = min(rivals, key=fastest.get)
        fastest_words = (f"; fastest windows: tuned {_ms(fastest['tvm_tuned'])} ms, "
                         f"{fastest['tvm_tuned'] / fastest[top]:.2f}x {LABELS[top]}'s "
                         f"{_ms(fastest[top])} ms")
    else:
        fastest_words = ""
    if ratio <= 1.0:
        return True, (f"**at or below**: tuned {_ms(lat['tvm_tuned'])} ms, {ratio:.2f}x "
                      f"{LABELS[best]}'s {_ms(rivals[best])} ms{fastest_words}")
    return False, (f"**not reached**: tuned {_ms(lat['tvm_tuned'])} ms is {ratio:.2f}x "
                   f"{LABELS[best]}'s {_ms(rivals[best])} ms (slower by "
                   f"{lat['tvm_tuned'] - rivals[best]:.2f} ms){fastest_words}")


def _fastest_windows(rec: dict, names: tuple[str, ...]) -> dict[str, float] | None:
    """Each runtime's fastest timing window (ms), where every one of ``names`` has them."""
    windows = rec.get("latency_windows_ms") or {}
    if not all(windows.get(n) for n in names):
        return None
    return {n: min(windows[n]) for n in names}


def page(records: list[dict], prov: dict) -> str:
    """The markdown page of the records."""
    names = list(LABELS)
    lines = ["# The runtimes users deploy on, side by side", "",
             "Command: `python -m bench.runtimes` (`--budgets 2048` for the long run; this page "
             f"was last written by `{prov['command']}`). Each network is tuned by `tune.py` "
             "(default preset) to the budget in its own work dir; then one process builds the "
             "tuned network from the work dir's schedules and times it beside PyTorch eager, "
             "torch.compile (inductor), ONNX Runtime (CPUExecutionProvider) and OpenVINO (CPU, "
             "`PERFORMANCE_HINT=LATENCY`), all with the same thread count, on the same float32 "
             "input (an NCHW image; `bert-tiny`: token embeddings), side by side in "
             "alternating rounds (each runtime's median window). Every runtime has the same "
             "weights: the network as `tune.py` imports it (torchvision or built in, weights "
             "seeded, batch norm folded); ONNX Runtime and OpenVINO read "
             "the ONNX file `torch.onnx.export` writes from that module. Records: "
             "`docs/bench/runs/runtimes/<platform>/`.", "",
             "Each cell: median ms (fraction of PyTorch eager's). *OpenVINO default* runs in "
             "the plugin's default precision, read back from it (bf16 on CPUs with bf16): "
             "**lower precision**, not comparable as an f32 result; *fastest f32* leaves it "
             "out. `*` after a network: other processes took more than 10 % of the cores "
             "while it was timed (recorded since 2026-12-07 as `machine_load`; older records "
             "say nothing of it).", "",
             "| CPU | network | trials | " + " | ".join(LABELS[n] for n in names[:-1])
             + " | OpenVINO default (lower precision) | fastest f32 | tuned <= faster of ORT, "
             "OpenVINO f32 |", "|" + "---|" * (len(names) + 5)]
    for r in records:
        ok, _ = verdict(r)
        best = fastest_f32(r)
        lines.append(f"| {r['platform']} | {r['network']}{_loaded(r)} | {_trials(r)} | "
                     + " | ".join(_cell(r, n) for n in names)
                     + f" | {LABELS[best] if best else '-'} | "
                     f"{'-' if ok is None else ('yes' if ok else '**no**')} |")
    lines += ["", "## Tuned build against the faster of ONNX Runtime and OpenVINO f32", "",
              "A build tuned in bf16 (`--precision bf16`; trials marked *bf16*) is compared "
              "with OpenVINO's default, bf16, instead. The verdict is on the medians; the "
              "fastest windows are beside them because on a shared VM the host's CPU capacity "
              "can swing from one second to the next, and a TVM build, whose pool pins a "
              "worker to each core and splits each parallel loop evenly, loses more in the "
              "slow spells than ONNX Runtime or OpenVINO do ([lab/compile](../lab/compile/"
              "README.md): the thread-pool and squeezenet-profile rows).", ""]
    lines += [f"- {r['platform']}, {r['network']}, {_trials(r)} trials: {verdict(r)[1]}."
              for r in records] or ["- no records yet."]
    lines += ["", "## Outputs and threads", "",
              "Relative max error of each output against PyTorch eager's (max |difference| "
              "over max |eager|); the thread count each runtime reports it runs with (TVM's "
              "pool, `torch.get_num_threads()`, ONNX Runtime's `intra_op_num_threads`, "
              "OpenVINO's `INFERENCE_NUM_THREADS`).", "",
              "| CPU | network | trials | error: " + " / ".join(
                  LABELS[n] for n in names if n != "torch") + " | threads: " + " / ".join(
                  LABELS[n] for n in names) + " | failed |", "|---|---|---|---|---|---|"]
    for r in records:
        errs = " / ".join("-" if (e := r["rel_error"].get(n)) is None else f"{e:.1e}"
                          for n in names if n != "torch")
        threads = " / ".join(str(r["threads"].get(n, "-")) for n in names)
        failed = "; ".join(f"{LABELS.get(n, n)}: {e}" for n, e in r.get("failures", {}).items())
        lines.append(f"| {r['platform']} | {r['network']} | {_trials(r)} | {errs} | "
                     f"{threads} | {failed or '-'} |")
    lines += ["", "## Provenance", ""]
    lines += machine_lines(records)
    for v in sorted({json.dumps(r["versions"], sort_keys=True) for r in records}):
        lines.append("- versions: " + ", ".join(f"{k} {s}" for k, s in json.loads(v).items()))
    lines += [f"- timing: {t['windows']} windows of at least {t['min_window_ms']} ms over "
              f"{t['rounds']} alternating rounds, each turn after one untimed call"
              for t in sorted({json.dumps(r["timing"], sort_keys=True) for r in records})
              for t in [json.loads(t)]]
    for cmd in sorted({r["command"] for r in records}):
        lines.append(f"- measured by `{cmd}`")
    span = measured_span(records)
    if span:
        lines.append(f"- measured {span[0]} to {span[1]}")
    lines.append("")
    return "\n".join(lines)


def write_page(records: list[dict], out: str, prov: dict) -> None:
    """``out``.md and ``out``.json from the records."""
    doc = {"command": prov["command"], "date": prov["date"], "records": records}
    write_results(out + ".json", out + ".md", doc, page(records, prov), rows_key="records")


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the process exit code."""
    from tuner.app.config import EvaluateConfig, TuneConfig
    from tuner.engine.platforms import platform_id
    from tuner.engine.targets import resolve_target

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--networks", nargs="+", default=list(NETWORKS))
    p.add_argument("--budgets", nargs="+", type=int, default=[TuneConfig.trials],
                   help=f"trials (default: tune.py's, {TuneConfig.trials})")
    p.add_argument("--windows", type=int, default=BENCH_WINDOWS,
                   help="timing windows per runtime (default: bench.common.BENCH_WINDOWS)")
    p.add_argument("--min-window-ms", type=float, default=EvaluateConfig.min_repeat_ms)
    p.add_argument("--rounds", type=int, default=BENCH_ROUNDS)
    p.add_argument("--work-root", default=os.path.join(REPO, "work", "runtimes"))
    p.add_argument("--runs-dir", default=RUNS, help="where the records go, per platform")
    p.add_argument("--out", default=OUT, help="page and JSON path, without extension")
    p.add_argument("--report-only", action="store_true", help="only rewrite the page")
    p.add_argument("--retime", action="store_true",
                   help="measure the networks and budgets named again, their records "
                        "replaced: the work dir resumes at its budget (no new trials where "
                        "it is there) and every runtime is timed anew")
    p.add_argument("--quiet-wait", type=float, default=10.0,
                   help="minutes to wait, before timing a network, for other processes to "
                        "leave the cores (then timed anyway, marked as under load)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="tune in this precision (tune.py --precision; bf16 is compared with "
                        "OpenVINO's bf16)")
    p.add_argument("overrides", nargs="*", help="tune.py config overrides")
    args = p.parse_args(argv)
    runs, out = in_repo(args.runs_dir), in_repo(args.out)
    prov = provenance("bench.runtimes")
    prov["command"] = run_command(prov)
    if not args.report_only:
        platform = platform_id(resolve_target("llvm").target)
        timing = {"windows": args.windows, "min_window_ms": args.min_window_ms,
                  "rounds": args.rounds}
        os.makedirs(os.path.join(runs, platform), exist_ok=True)
        for net in args.networks:
            for budget in sorted(args.budgets):
                path = record_path(runs, platform, net, budget, args.precision)
                if args.retime and os.path.exists(path):
                    os.remove(path)  # the old record stays in git history
                recorded_run(path,
                             f"{net}, {budget} trials, {args.precision}, on {platform}",
                             lambda net=net, budget=budget: measure(
                                 net, budget, args.work_root, args.overrides, timing,
                                 prov["command"], args.precision, args.quiet_wait))
                write_page(load_records(runs), out, prov)  # after each: the page so far
    if args.report_only or not args.networks:
        write_page(load_records(runs), out, prov)
    return 0


if __name__ == "__main__":
    sys.exit(main())
