# Last ran on commit (see the record's "code")
"""What TVM 0.27 does with bf16 and int8 on this CPU, each answer from TVM itself.

1. ``relax.transform.ToMixedPrecision``: does it take ``out_dtype="bfloat16"``, and what
   does it convert with ``float32`` (the accumulator)?
2. A bf16 matmul with f32 accumulation, plainly vectorized and built for this CPU: which
   vector instructions does LLVM emit (``vdpbf16ps``, or widening and f32 FMA)?
3. ``llvm.x86.avx512bf16.dpbf16ps.512`` called from TIR directly (as TVM's VNNI intrinsic
   calls ``vpdpbusd``): does it build?
4. The same through :mod:`tuner.engine.bf16_dot` (an LLVM IR shim): instructions emitted.
5. MetaSchedule's default design space for a u8 x i8 -> i32 matmul and for a bf16 one on
   this target: which tensor intrinsics does it use?
6. MetaTune's loop-nest features (the cost model's input) of a tensorized bf16 schedule.

    python -m experiments.precision_probe --out docs/lab/precision/probe.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re

from bench.common import REPO, provenance, write_json_atomic

OPS = ("vdpbf16ps", "vpdpbusd", "vfmadd231ps", "vfmadd213ps", "vpmovzxwd", "vpslld")


def _ops(lib) -> dict[str, int]:
    asm = lib.mod.inspect_source("asm")
    counts = collections.Counter(re.findall(r"^\s+(v\w+)", asm, re.M))
    return {op: counts.get(op, 0) for op in OPS}


def _error(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return next((ln for ln in reversed(lines) if "rror" in ln or "match" in ln), lines[-1])[:300]


def mixed_precision() -> dict:
    """Question 1, on a conv + bias + ReLU + linear network."""
    import torch
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(32 * 8 * 8, 16)).eval()
    mod = from_exported_program(torch.export.export(model, (torch.randn(1, 16, 8, 8),)))
    mod = relax.transform.ConvertToDataflow()(mod)
    out = {}
    for dtype in ("float32", "bfloat16"):
        try:
            text = relax.transform.ToMixedPrecision(out_dtype=dtype)(mod)["main"].script()
            out[dtype] = {"dtypes": sorted(set(re.findall(r'dtype="(\w+)"', text)))}
        except Exception as err:  # TVM raises its own error types
            out[dtype] = {"error": _error(err)}
    return out


def _matmul(dtype_in: tuple[str, str], dtype_acc: str, n: int = 256):
    from tvm import te

    a = te.placeholder((n, n), dtype_in[0], name="A")
    b = te.placeholder((n, n), dtype_in[1], name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(
        a[i, k].astype(dtype_acc) * b[j, k].astype(dtype_acc), axis=k), name="C")
    return te.create_prim_func([a, b, c])


def plain_bf16(target) -> dict:
    """Question 2: a bf16 matmul, output channels vectorized by 16, no intrinsic."""
    import tvm

    sch = tvm.s_tir.Schedule(_matmul(("bfloat16", "bfloat16"), "float32"))
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(i, jo, k, ji)
    sch.vectorize(ji)
    return _ops(tvm.compile(sch.mod, target))


def direct_intrinsic(target) -> dict:
    """Question 3: the LLVM intrinsic called from TIR with bf16 vectors."""
    import tvm
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def func(a: T.Buffer((32,), "bfloat16"), b: T.Buffer((32,), "bfloat16"),
             c: T.Buffer((16,), "float32")):
        c[T.ramp(0, 1, 16)] = T.call_llvm_pure_intrin(
            T.llvm_lookup_intrinsic_id("llvm.x86.avx512bf16.dpbf16ps.512"),
            c.vload([0], "float32x16"), a.vload([0], "bfloat16x32"), b.vload([0], "bfloat16x32"),
            dtype="float32x16")

    try:
        tvm.compile(tvm.IRModule({"main": func}), target)
        return {"builds": True}
    except Exception as err:  # LLVM's verifier, raised as a TVM error
        return {"builds": False, "error": _error(err)}


def design_spaces(target) -> dict:
    """Questions 4 and 5: the intrinsics in the default design spaces, and what the
    tensorized bf16 schedule compiles to."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tuner.engine import bf16_ops
    from tuner.engine.bf16_dot import INTRIN, LANES, PAIR, register

    register()
    out = {}
    cases = {"u8 x i8 -> i32": _matmul(("uint8", "int8"), "int32"),
             "bf16 x bf16 -> f32": _matmul(("bfloat16", "bfloat16"), "float32")}
    # the product's own bf16 dense (rounding block, annotated reduction), as tune.py
    # --precision bf16 builds it: a 256 x 256 f32 matmul by a packed bf16 weight
    cases["bf16, block annotated for tuner.engine.bf16_dot"] = bf16_ops.prim_func(
        bf16_ops.dense, [[256, 256], [256 // LANES, 256 // PAIR, LANES, PAIR]],
        name="dense_bf16")
    for name, func in cases.items():
        mod = tvm.IRModule({"main": func})
        ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                             search_strategy="replay-trace", rand_state=1, num_threads=1)
        spaces = ctx.space_generator.generate_design_space(mod)
        intrins = sorted({m for s in spaces
                          for m in re.findall(r'auto_tensorize", ann_val="(\w+)"', str(s.trace))})
        case = {"rules": [type(r).__name__ for r in ctx.space_generator.sch_rules],
                "spaces": len(spaces), "tensor_intrinsics": intrins}
        built, errors = 0, collections.Counter()
        for seed in range(1, 17):  # the first space's trace, its decisions sampled anew
            sch = tvm.s_tir.Schedule(mod, seed=seed)
            tvm.s_tir.Trace(spaces[0].trace.insts, {}).apply_to_schedule(
                sch, remove_postproc=True)
            if not all(p.apply(sch) for p in ctx.space_generator.postprocs):
                errors["a postprocessor refused it"] += 1
                continue
            try:
                lib = tvm.compile(sch.mod, target)
            except Exception as err:  # a build error of TVM's
                errors[_error(err)] += 1
                continue
            built += 1
            case.setdefault("asm", _ops(lib))
            if name.startswith("bf16, block") and "features" not in out:
                out["features"] = features(sch.mod["main"])
        case["samples_built"] = f"{built} of 16"
        case["build_errors"] = dict(errors)
        out[name] = case
    out["intrin"] = INTRIN
    return out


def features(func) -> dict:
    """Question 6: the cost model's loop-nest graph of a tensorized schedule."""
    from metatune.loopnest import read_loop_nest

    nest = read_loop_nest(func)
    return {"loops": len(nest.loops), "blocks": len(nest.blocks),
            "block_names": [b.name for b in nest.blocks][:8]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "docs", "lab", "precision",
                                                      "probe.json"))
    args = parser.parse_args()

    from metatune.provenance import code_version
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.targets import resolve_target

    load_tensor_intrinsics(("llvm",))
    target = resolve_target("llvm").target
    doc = {**provenance("experiments.precision_probe"), "code": code_version(),
           "to_mixed_precision": mixed_precision(), "plain_bf16_matmul_asm": plain_bf16(target),
           "direct_dpbf16ps_call": direct_intrinsic(target),
           "design_spaces": design_spaces(target)}
    write_json_atomic(args.out, doc)
    print(json.dumps({k: v for k, v in doc.items() if k not in ("runtime",)}, indent=1))


if __name__ == "__main__":
    main()
