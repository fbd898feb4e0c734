# Last ran on commit c78ee34
"""Does bf16 pay on this CPU? One kernel tuned in f32, in TVM's own bf16, and in
MetaTune's bf16 (``vdpbf16ps``), then timed interleaved in one process.

Each variant is a one-layer network extracted as ``tune.py`` does (NHWC, weights packed),
its heaviest task tuned with ``tune.py``'s loop (:func:`tuner.app.tuning.tune`, the
configured preset, the same seed and trials); the best schedule of each is compiled alone
and the three are timed in alternating rounds (:func:`tuner.engine.timing.interleaved`),
and the one-layer network, compiled with each database, is checked against the f32
build's output on the same random input.

- ``fp32``: the layer as imported.
- ``bf16-tvm``: data and weight cast to bf16 (``R.astype``), TVM's own conv2d / matmul
  with ``out_dtype=float32`` (what ``ToMixedPrecision`` would make, were it able to emit
  bf16): TIR's ``BF16ComputeLegalize`` lowers it to f32 FMA on widened bf16 loads.
- ``bf16``: :mod:`tuner.engine.precision` (``tune.py precision=bf16``).

    python -m experiments.precision_kernel --kernels conv3x3 dense --trials 32 \\
        --out docs/lab/precision/kernels
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

import numpy as np

from bench.common import REPO, provenance, write_json_atomic

#: name -> (what, relax builder args): NHWC conv (H, C, O, K) or dense (M, K, N).
KERNELS = {
    "conv3x3": ("resnet-18's 3x3 conv, 64->64 at 56x56", ("conv", 56, 64, 64, 3)),
    "conv1x1": ("a 1x1 conv, 256->256 at 14x14", ("conv", 14, 256, 256, 1)),
    "dense": ("alexnet's 4096->4096 dense, batch 1", ("dense", 1, 4096, 4096)),
}
VARIANTS = ("fp32", "bf16-tvm", "bf16")


def relax_layer(spec, variant: str, seed: int = 0):
    """The one-layer Relax module (input f32, weight bound, ``+ bias, relu``) and its
    input shape."""
    import tvm
    from tvm import relax

    rng = np.random.default_rng(seed)
    bb = relax.BlockBuilder()
    if spec[0] == "conv":
        _, h, c, o, k = spec
        shape = (1, h, h, c)
        w = rng.standard_normal((o, k, k, c)).astype("float32") / np.sqrt(k * k * c)
    else:
        _, m, k, n = spec
        shape = (m, k)
        w = rng.standard_normal((k, n)).astype("float32") / np.sqrt(k)
    bias = rng.standard_normal((spec[-2] if spec[0] == "dense" else spec[3],)).astype("float32")
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            data, weight = x, relax.const(w)
            if variant == "bf16-tvm":
                data = bb.emit(relax.op.astype(data, "bfloat16"))
                weight = bb.emit(relax.op.astype(weight, "bfloat16"))
            if spec[0] == "conv":
                pad = spec[4] // 2
                y = bb.emit(relax.op.nn.conv2d(data, weight, padding=pad, data_layout="NHWC",
                                               kernel_layout="OHWI", out_dtype="float32"))
            else:
                y = bb.emit(relax.op.matmul(data, weight, out_dtype="float32"))
            y = bb.emit(relax.op.add(y, relax.const(bias[: spec[-1]] if spec[0] == "dense"
                                                    else bias)))
            out = bb.emit_output(relax.op.nn.relu(y))
        bb.emit_func_output(out)
    del tvm
    return bb.get(), shape


def tune_variant(spec, variant: str, trials: int, overrides: list[str], work_dir: str) -> dict:
    """Extract, tune the heaviest task, return what was measured and the task's module."""
    from tvm.s_tir import meta_schedule as ms

    from tuner.app.config import load_tune_config
    from tuner.app.preflight import with_model_sources
    from tuner.app.tuning import tune
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    info = resolve_target("llvm")
    mod, shape = relax_layer(spec, variant)
    lowering = Lowering(layout="NHWC", precision="bf16" if variant == "bf16" else "fp32")
    tasks = extract_tasks(mod, info.target, lowering)[:1]
    cfg = with_model_sources(load_tune_config(overrides=[
        f"work_dir={work_dir}", "progress=false", "tensorboard=false", "log_level=WARNING",
        f"trials={trials}", *overrides]), info)
    database = ms.database.JSONDatabase(work_dir=work_dir)
    start = time.perf_counter()
    outcome = tune(tasks, target_info=info, cfg=cfg, work_dir=work_dir, database=database)
    return {"task": tasks[0].name, "mflop": tasks[0].flops / 1e6,
            "tuning_seconds": round(time.perf_counter() - start, 1),
            "trials": outcome.trials_run, "failures": outcome.failures,
            "best_measured_ms": outcome.best_ms[0], "errors": outcome.errors[:3],
            "_mod": tasks[0].extracted.dispatched[0], "_db": database, "_shape": shape,
            "_info": info, "_relax": mod, "_lowering": lowering}


def network_output(result: dict, seed: int = 0) -> np.ndarray:
    """The one-layer network compiled with the tuned database (its other tasks untuned),
    run on a random input in [-1, 1]."""
    from tuner.engine.evaluate import compile_network

    net = compile_network(result["_relax"], result["_info"].target, result["_db"], "cpu",
                          result["_lowering"])
    x = np.random.default_rng(seed).uniform(-1, 1, result["_shape"]).astype("float32")
    return net.run(x)


def compiled_kernel(result: dict):
    """The task's best schedule built alone: (runtime module, its asm's instruction
    counts of interest)."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    info = result["_info"]
    sch = ms.tir_integration.compile_tir(result["_db"], result["_mod"], info.target)
    # as the tuner's builder does: packed weights are inputs (packed once, at compile time)
    mod = tvm.s_tir.transform.RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
    lib = tvm.compile(mod, info.target)
    rt = lib.mod
    asm = rt.inspect_source("asm")
    counts = {op: len(re.findall(rf"\b{op}\b", asm))
              for op in ("vdpbf16ps", "vfmadd231ps", "vfmadd213ps", "vpslld", "vpmovzxwd")}
    return rt, mod, counts


def kernel_args(mod, seed: int = 0):
    """Random arguments for a task's PrimFunc (inputs in [-1, 1], bf16 where asked)."""
    import ml_dtypes
    import tvm

    rng = np.random.default_rng(seed)
    func = mod["main"]
    out = []
    for p in func.params:
        buf = func.buffer_map[p] if hasattr(func, "buffer_map") else p
        shape = [int(d) for d in buf.shape]
        dtype = str(buf.dtype)
        host = rng.uniform(-1, 1, shape).astype("float32")
        out.append(tvm.runtime.tensor(host.astype(ml_dtypes.bfloat16) if dtype == "bfloat16"
                                      else host.astype(dtype)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", default=["conv3x3"], choices=list(KERNELS))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--window-ms", type=float, default=20.0)
    parser.add_argument("--out", default=os.path.join(REPO, "docs", "lab", "precision",
                                                      "kernels"))
    parser.add_argument("--work-root", default=os.path.join(REPO, "work", "precision",
                                                            "kernels"),
                        help="one work dir per kernel and variant: a rerun resumes them "
                        "(re-times without tuning again once the budget is met)")
    parser.add_argument("overrides", nargs="*", help="tune config key=value")
    args = parser.parse_args()

    from bench.machine_load import quiet_timing
    from metatune.provenance import code_version
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.timing import interleaved

    load_tensor_intrinsics(("llvm",))
    doc = {**provenance("experiments.precision_kernel"), "code": code_version(),
           "trials": args.trials,
           "timing": {"windows": args.windows, "rounds": args.rounds,
                      "min_window_ms": args.window_ms, "order": "alternating"},
           "seed": args.seed, "overrides": args.overrides, "kernels": {}}
    for name in args.kernels:
        what, spec = KERNELS[name]
        results = {}
        for variant in args.variants:
            work_dir = os.path.join(args.work_root, f"{name}-{variant}")
            os.makedirs(work_dir, exist_ok=True)
            results[variant] = tune_variant(spec, variant, args.trials,
                                            [f"seed={args.seed}", *args.overrides], work_dir)
            results[variant]["work_dir"] = work_dir
            print(name, variant, {k: v for k, v in results[variant].items()
                                  if not k.startswith("_")}, flush=True)
        timers, outputs = {}, {}
        for variant, r in results.items():
            lib, mod, counts = compiled_kernel(r)
            r["asm"] = counts
            fargs = kernel_args(mod)
            outputs[variant] = network_output(r)
            timers[variant] = _window_timer(lib, fargs)
        with quiet_timing(600, interval=2.0) as loads:
            lat = interleaved(timers, args.windows, args.window_ms, args.rounds)
        ref = outputs.get("fp32")
        for variant, r in results.items():
            r["median_ms"] = lat[variant].median_ms
            r["min_ms"] = min(lat[variant].runs_ms)
            r["p10_ms"] = float(np.percentile(lat[variant].runs_ms, 10))
            r["windows_ms"] = lat[variant].runs_ms
            if ref is not None:
                r["rel_max_error_vs_fp32"] = float(np.abs(outputs[variant] - ref).max()
                                                   / np.abs(ref).max())
        if "fp32" in results:
            for r in results.values():
                r["speedup_vs_fp32"] = results["fp32"]["median_ms"] / r["median_ms"]
                r["speedup_vs_fp32_min"] = results["fp32"]["min_ms"] / r["min_ms"]
                r["speedup_vs_fp32_p10"] = results["fp32"]["p10_ms"] / r["p10_ms"]
        doc["kernels"][name] = {"what": what, "spec": list(spec),
                                "load_before": loads["machine_load_before"],
                                "load": loads["machine_load"], "variants": {
            v: {k: x for k, x in r.items() if not k.startswith("_")} for v, r in results.items()}}
        print(json.dumps(doc["kernels"][name], indent=1, default=str), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    write_json_atomic(args.out + ".json", doc)
    print("wrote", args.out + ".json")


def _window_timer(lib, fargs):
    """A :data:`tuner.engine.timing.WindowTimer` of a kernel on fixed arguments."""
    import math

    import tvm

    def windows(count: int, min_window_ms: float) -> list[float]:
        ev = lib.time_evaluator("main", tvm.cpu(), number=1, repeat=count,
                                min_repeat_ms=int(math.ceil(min_window_ms)))
        return [r * 1e3 for r in ev(*fargs).results]

    return windows


if __name__ == "__main__":
    main()
