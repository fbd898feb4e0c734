"""Tuning precision: bf16 convolutions and dense layers on ``vdpbf16ps``, f32 in and out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from metatune.config import repo_path
from metatune.errors import ConfigError
from tuner.app.config import TuneConfig, load_tune_config
from tuner.engine.precision import PRECISIONS, RTOL, check_precision, rtol_for


def _has_bf16() -> bool:
    from tvm.target import codegen

    from tuner.engine.targets import resolve_target

    return bool(codegen.target_has_features("avx512bf16", resolve_target("llvm").target))


needs_bf16 = pytest.mark.skipif(not _has_bf16(), reason="this CPU has no AVX-512 BF16")


def test_the_config_key_defaults_to_fp32_in_schema_and_yaml():
    with open(repo_path("configs", "tune.yaml"), encoding="utf-8") as f:
        assert yaml.safe_load(f)["precision"] == TuneConfig().precision == "fp32"
    assert load_tune_config(overrides=["precision=BF16"]).precision == "bf16"


@pytest.mark.parametrize("precision, layout, mcpu, says", [
    ("fp16", "NHWC", None, "choose one of fp32, bf16"),
    ("bf16", "NCHW", None, "needs layout=NHWC"),
    ("bf16", "NHWC", "znver3", "znver3"),
])
def test_a_precision_that_cannot_run_is_refused_in_one_line(precision, layout, mcpu, says):
    import tvm

    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu}) if mcpu else None
    with pytest.raises(ConfigError, match=says):
        check_precision(precision, layout, target)
    with pytest.raises(ConfigError):
        load_tune_config(overrides=[f"precision={precision}", f"layout={layout}"]
                         if mcpu is None else ["precision=nope"])


@pytest.mark.parametrize("argv, says", [
    (["--precision", "bf16", "--target", '{"kind": "llvm", "mcpu": "znver3"}'],
     "needs a CPU with AVX-512 BF16"),
    (["--precision", "bf16", "layout=NCHW"], "needs layout=NHWC"),
    (["--precision", "int8"], "choose one of fp32, bf16"),
])
def test_tune_py_refuses_a_precision_it_cannot_run_before_making_the_work_dir(
        argv, says, capsys, tmp_path):
    import tune

    flags = [a for a in argv if "=" not in a or a.startswith("{")]
    overrides = [a for a in argv if a not in flags]
    code = tune.main(flags + ["--work-dir", str(tmp_path / "w"), "evaluate.enabled=false",
                              *overrides])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and says in err and "\n" not in err
    assert not (tmp_path / "w").exists()


def test_a_cpu_with_avx512_bf16_passes_and_bf16_loosens_the_check():
    import tvm

    check_precision("bf16", "NHWC", tvm.target.Target({"kind": "llvm", "mcpu": "znver4"}))
    assert set(PRECISIONS) == set(RTOL)
    assert rtol_for("fp32", 1e-3) == 1e-3
    assert rtol_for("bf16", 1e-3) == RTOL["bf16"] > 1e-3
    assert rtol_for("bf16", 0.5) == 0.5  # a looser configured tolerance stays


def _tiny_net():
    """A 3-channel conv (stays f32: odd input channels), a 16->32 conv and a 32->16 dense."""
    import torch
    from torch import nn

    from tuner.engine.networks import load_torch_network

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 16)).eval()
    return load_torch_network(model, "tiny", (1, 3, 16, 16))


def _bf16_blocks(task) -> list[str]:
    """The blocks of a task annotated for the bf16 rules (the rounding, the reduction)."""
    import tvm

    from tuner.engine.bf16_dot import ROUND_RULE, RULE

    sch = tvm.s_tir.Schedule(task.extracted.dispatched[0])
    blocks = [sch.get(b) for b in sch.get_child_blocks(sch.get_sblock("root"))]
    return [b.name_hint for b in blocks
            if str(b.annotations.get("schedule_rule", "")) in (RULE, ROUND_RULE)]


def test_bf16_converts_the_eligible_convolutions_and_dense_layers_only():
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    net = _tiny_net()
    target = resolve_target("llvm").target
    fp32 = extract_tasks(net.relax_mod, target, Lowering(layout="NHWC"))
    bf16 = extract_tasks(net.relax_mod, target, Lowering(layout="NHWC", precision="bf16"))
    assert not any("bf16" in t.name for t in fp32)
    converted = [t for t in bf16 if "bf16" in t.name]
    assert sorted(n for t in converted for n in ("conv2d_nhwc_bf16", "dense_bf16")
                  if n in t.name) == ["conv2d_nhwc_bf16", "dense_bf16"]
    # the first conv (3 input channels) keeps TVM's own f32 conv2d
    assert sum("conv2d" in t.name and "bf16" not in t.name for t in bf16) == 1
    # the rounding is inside each kernel and the epilogue fuses: as many tasks as f32
    assert len(bf16) == len(fp32)
    for task in converted:
        func = task.extracted.dispatched[0]["main"]
        dtypes = [str(p.dtype) for p in func.params]
        assert dtypes[:2] == ["float32", "bfloat16"] and dtypes[-1] == "float32"
        reduction = "dense_bf16" if "dense" in task.name else "conv2d_nhwc_bf16"
        assert sorted(_bf16_blocks(task)) == sorted([reduction, "to_bf16"]), task.name
        # packed weights are not layout-free (already in the intrinsic's layout)
        assert 1 not in [int(i) for i in func.attrs.get("layout_free_buffers", [])]
    # the network's input and output stay f32
    params = net.relax_mod["main"].params
    assert [str(p.ty.dtype) for p in params] == ["float32"]


@needs_bf16
def test_a_bf16_build_is_close_to_pytorch_but_not_exact():
    from tvm.s_tir import meta_schedule as ms

    from tuner.engine.evaluate import check_output, compile_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering

    net = _tiny_net()
    target = resolve_target("llvm").target
    x = net.example_input()
    errors = {}
    for precision in PRECISIONS:
        built = compile_network(net.relax_mod, target, ms.database.MemoryDatabase(), "cpu",
                                Lowering(layout="NHWC", precision=precision))
        errors[precision] = check_output(built.run(x), net.reference(x), 1.0)
    assert errors["fp32"] < 1e-5
    assert 1e-5 < errors["bf16"] < RTOL["bf16"]


@needs_bf16
def test_every_sampled_schedule_is_tensorized_and_builds_to_vdpbf16ps():
    """Decisions sampled anew, as the search does: each schedule tensorizes and builds
    (none vectorizes the loops around the intrinsic), and runs ``vdpbf16ps``."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tuner.engine.bf16_dot import INTRIN, KEEP_SERIAL
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    info = resolve_target("llvm")
    tasks = extract_tasks(_tiny_net().relax_mod, info.target,
                          Lowering(layout="NHWC", precision="bf16"))
    for task in (t for t in tasks if "bf16" in t.name):
        mod = task.extracted.dispatched[0]
        ctx = ms.TuneContext(mod=mod, target=info.target, space_generator="post-order-apply",
                             search_strategy="replay-trace", rand_state=1, num_threads=1)
        spaces = ctx.space_generator.generate_design_space(mod)
        assert spaces and all(INTRIN in str(s.trace) and KEEP_SERIAL in str(s.trace)
                              for s in spaces)
        for seed in range(1, 9):
            sch = tvm.s_tir.Schedule(mod, seed=seed)
            tvm.s_tir.Trace(spaces[seed % len(spaces)].trace.insts, {}).apply_to_schedule(
                sch, remove_postproc=True)
            assert all(p.apply(sch) for p in ctx.space_generator.postprocs)
            assert "tensorize(block_or_loop=" in str(sch.trace), task.name
            asm = tvm.compile(sch.mod, info.target).mod.inspect_source("asm")
            assert "vdpbf16ps" in asm, task.name


@needs_bf16
@pytest.mark.slow
def test_tune_py_bf16_tunes_checks_reports_and_exports(tmp_path):
    from tuner.app.run import run_tune

    work = tmp_path / "work"
    report = run_tune(load_tune_config(overrides=[
        "network=null", "model=tests.models:tiny_convnet", "input_shape=[8,16,16]",
        f"work_dir={work}", "precision=bf16", "trials=4", "trials_per_round=4",
        "preset=xgb", "search_params.population_size=32",
        "search_params.init_min_unmeasured=8", "runner.min_repeat_ms=10",
        "evaluate.torch=false", "evaluate.untuned=false", "evaluate.repeat=2",
        "evaluate.min_repeat_ms=5", "evaluate.rounds=1", f"export={tmp_path / 'art'}",
        "progress=false", "tensorboard=false", "log_level=WARNING"]))
    assert report["precision"] == "bf16" and report["config"]["precision"] == "bf16"
    assert report["check_rtol"] == RTOL["bf16"]
    assert 0 < report["check_error"] < RTOL["bf16"]
    assert any("conv2d_nhwc_bf16" in t["name"] for t in report["tasks"])
    assert report["trials_run"] == 4 and report["failures"] < 4
    with open(os.path.join(tmp_path / "art", "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["precision"] == "bf16" and manifest["check_error"] < RTOL["bf16"]
    assert [i["dtype"] for i in manifest["inputs"]] == ["float32"]
    # export.py in a fresh process reads the bf16 work dir (its traces name the intrinsic)
    done = subprocess.run([sys.executable, repo_path("export.py"), "--work-dir", str(work),
                           "--out", str(tmp_path / "again")], capture_output=True, text=True,
                          cwd=repo_path())
    assert done.returncode == 0, done.stderr[-2000:]
    with open(os.path.join(tmp_path / "again", "manifest.json"), encoding="utf-8") as f:
        again = json.load(f)
    assert again["precision"] == "bf16" and again["check_error"] < RTOL["bf16"]
    # torch.compile(backend="metatune") reads the work dir's precision: bf16's error, not f32's
    import torch

    from tests.models import tiny_convnet

    torch._dynamo.reset()
    model, x = tiny_convnet(), torch.randn(1, 8, 16, 16)
    compiled = torch.compile(model, backend="metatune",
                             options={"work_dir": str(work), "memory": False})
    with torch.no_grad():
        out, expected = compiled(x), model(x)
    torch._dynamo.reset()
    error = float((out - expected).abs().max() / expected.abs().max())
    assert 1e-5 < error < RTOL["bf16"]
