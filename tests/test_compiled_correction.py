"""The compiled-code correction the tuner uses: features read from LLVM's assembly, the
fitted trees saved beside a checkpoint, and the BO search's short list corrected by them."""

from __future__ import annotations

import os
import types

import numpy as np
import pytest

from metatune.errors import CheckpointError, ConfigError
from tuner.models import compiled_code
from tuner.models.compiled_correction import CompiledReranker, Correction

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_new_compiled_cache_starts_from_the_shipped_features(tmp_path, monkeypatch):
    import tarfile


    made = tmp_path / "made" / "abc-v1"
    made.mkdir(parents=True)
    (made / "w.json").write_text('{"key": [1.0]}')
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    with tarfile.open(shipped / "abc-v1.tar.gz", "w:gz") as tar:
        tar.add(made, arcname="abc-v1")
    monkeypatch.setattr(compiled_code, "SHIPPED", str(shipped))
    cache = tmp_path / "cache"
    assert compiled_code.unpack_shipped(str(cache / "abc-v1"))
    assert (cache / "abc-v1" / "w.json").read_text() == '{"key": [1.0]}'
    assert not compiled_code.unpack_shipped(str(cache / "other-v1"))  # none shipped


def test_compiled_features_count_the_hot_loop_and_are_cached(tmp_path, monkeypatch):
    import tvm
    from tvm import s_tir, te

    asm = "\n".join([
        "main_compute_:", "\tmovq\t%rdi, %rax", ".LBB0_1:", ".LBB0_2:",
        "\tvmovups\t(%rax,%rcx,4), %zmm1", "\tvfmadd231ps\t%zmm1, %zmm2, %zmm0",
        "\tvmovups\t%zmm3, 64(%rsp)", "\tjne\t.LBB0_2", "\tvfmadd231ss\t%xmm1, %xmm2, %xmm0",
        "\tjne\t.LBB0_1", "\tretq",
        "__TVMBackendAllocWorkspace:", "\tvfmadd231ps\t%zmm1, %zmm2, %zmm0"])
    f = dict(zip(compiled_code.FEATURE_NAMES, compiled_code.asm_features(asm)))
    assert f["all_fma_zmm"] == 1 and f["all_fma_s"] == 1  # the runtime helper is not counted
    assert (f["loops"], f["inner_loops"], f["depth"]) == (2, 1, 2)
    assert (f["hot_n"], f["hot_fma_zmm"], f["hot_vload"], f["hot_vstore"], f["hot_stack"]) == (
        4, 1, 1, 1, 1)
    assert f["hot_fma_per_mem"] == 0.5 and f["all_branch"] == 2

    a = te.placeholder((64, 64), name="a")
    b = te.compute((64, 64), lambda i, j: a[i, j] * 2.0, name="b")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b])})
    cand = types.SimpleNamespace(sch=s_tir.Schedule(mod))
    target = tvm.target.Target("llvm")
    x = compiled_code.compiled_features("t/w", [cand], ["trace"], target, str(tmp_path))
    assert x.shape == (1, len(compiled_code.FEATURE_NAMES)) and x[0, 0] > 0

    from tvm.s_tir.meta_schedule.builder import local_builder

    def no_build(*args):
        raise RuntimeError("built again")

    monkeypatch.setattr(local_builder, "default_build", no_build)
    again = compiled_code.compiled_features("t/w", [cand, cand], ["trace", "other"], target,
                                            str(tmp_path))
    assert np.array_equal(again[0], x[0]) and np.isnan(again[1]).all()  # cached; a failure
    (cache,) = tmp_path.glob("*/t__w.json")
    cache.write_text("{torn")  # a torn cache file is rebuilt, not an error
    assert np.isnan(compiled_code.compiled_features("t/w", [cand], ["trace"], target,
                                                    str(tmp_path))).all()


def _trees(seed: int = 0) -> Correction:
    """Trees whose guess follows the first compiled count (what the tests can check)."""
    import xgboost as xgb

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(200, 2 * len(compiled_code.FEATURE_NAMES)))
    booster = xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(x, label=x[:, 0]), 20)
    return Correction(booster, 2.0, {"workloads": 3})


def test_a_saved_correction_loads_and_a_bad_one_is_refused(tmp_path):
    fit = _trees()
    path = str(tmp_path / "m.asm.json")
    fit.save(path, {"command": "python bench/compiled_correction.py --checkpoint m.ckpt"})
    again, prov = Correction.load(path)
    x = np.random.default_rng(1).normal(size=(5, 2 * len(compiled_code.FEATURE_NAMES)))
    import xgboost as xgb

    assert again.weight == 2.0 and prov["command"].startswith("python bench/")
    assert np.allclose(again.booster.predict(xgb.DMatrix(x)), fit.booster.predict(xgb.DMatrix(x)))
    (tmp_path / "torn.asm.json").write_text('{"format": "metatune-compiled')
    with pytest.raises(CheckpointError, match="fit it again .python bench/compiled_correction"
                                              r".py --checkpoint .*torn.ckpt"):
        Correction.load(str(tmp_path / "torn.asm.json"))
    import json

    blob = json.loads(open(path).read())
    blob["feature_version"] = compiled_code.VERSION + 1
    (tmp_path / "old.asm.json").write_text(json.dumps(blob))
    with pytest.raises(CheckpointError, match="features version"):
        Correction.load(str(tmp_path / "old.asm.json"))


def test_the_reranker_builds_the_pools_best_and_corrects_what_it_built(monkeypatch):
    """Of the pool (eligible), the ``top`` best by the members' mean are built, once; each
    member's scores move by its weight x std x the centred guess; the rest keep theirs."""
    import tvm_ffi

    monkeypatch.setattr(tvm_ffi, "structural_hash", lambda mod: mod)
    cands = [types.SimpleNamespace(sch=types.SimpleNamespace(mod=i)) for i in range(8)]
    built: list[int] = []
    counts = {i: float(i % 3) for i in range(8)}  # the first compiled count of each

    def fake_build(self, mods, hashes):
        built.extend(hashes)
        for h in hashes:
            row = np.zeros(len(compiled_code.FEATURE_NAMES))
            row[0] = counts[h] * 10
            self._features[h] = row

    monkeypatch.setattr(CompiledReranker, "_build", fake_build)
    fits = [_trees(0), Correction(_trees(1).booster, 0.0, {})]  # the second member: weight 0
    reranker = CompiledReranker(fits, cost_model=None, target=None, top=3)
    scores = np.array([[0.0, 1, 2, 3, 4, 5, 6, 7], [7.0, 6, 5, 4, 3, 2, 1, 0]])
    scores[1] = scores[0]  # the same order: the pool's best are 7, 6, 5
    out = reranker.correct(cands, scores, eligible=np.arange(2, 8))
    assert sorted(built) == [5, 6, 7]
    same = [0, 1, 2, 3, 4]
    assert np.allclose(out[same], scores.mean(0)[same])  # not built: the model's score
    moved = out[[5, 6, 7]] - scores.mean(0)[[5, 6, 7]]
    assert np.isclose(moved.sum(), 0.0) and np.ptp(moved) > 0  # centred, and it moves them
    # the next round builds only what is new; what was built before stays corrected
    again = reranker.correct(cands, scores, eligible=np.array([0, 1, 7]))
    assert sorted(built) == [0, 1, 5, 6, 7] and not np.allclose(again[5], scores.mean(0)[5])
    with pytest.raises(ValueError, match="members"):
        reranker.correct(cands, scores[:1], eligible=np.arange(8))


def _tune_overrides(work, *more: str) -> list[str]:
    return [
        "network=null", "model=tests.models:tiny_convnet", "input_shape=[8,16,16]",
        "layout=NCHW", f"work_dir={work}", "trials=16", "trials_per_round=8",
        "search_params.population_size=32", "search_params.init_min_unmeasured=8",
        "search_params.bo.population=32", "search_params.bo.pool_size=32",
        "search_params.bo.mc_samples=32", "runner.min_repeat_ms=10", "evaluate.enabled=false",
        "progress=false", "tensorboard=false", "log_level=WARNING", "cost_model=metatune",
        "search=bo", "metatune.compiled_correction=true", *more]


def test_a_correction_needs_its_file_the_metatune_model_and_bo(tmp_path):
    from tuner.app.config import load_tune_config
    from tuner.app.run import run_tune

    ckpt = tmp_path / "m.ckpt"
    import shutil

    shutil.copy(os.path.join(REPO, "checkpoints", "llvm-znver4-super.ckpt"), ckpt)
    shutil.copy(os.path.join(REPO, "checkpoints", "llvm-znver4-super.json"), tmp_path / "m.json")
    with pytest.raises(CheckpointError, match="bench/compiled_correction.py --checkpoint"):
        run_tune(load_tune_config(overrides=_tune_overrides(
            tmp_path / "w", f"metatune.checkpoint={ckpt}", "metatune.ensemble=[]")))
    with pytest.raises(ConfigError, match="search=bo"):
        run_tune(load_tune_config(overrides=_tune_overrides(tmp_path / "w", "search=rl")))
    with pytest.raises(ConfigError, match="compiled_top"):
        load_tune_config(overrides=_tune_overrides(tmp_path / "w", "metatune.compiled_top=0"))


def test_bo_tunes_with_the_shipped_correction(tmp_path, monkeypatch):
    """The shipped checkpoint pair and their corrections, real builds of the short list."""
    from tuner.app.config import load_tune_config
    from tuner.app.run import run_tune

    built: list[int] = []
    real = CompiledReranker._build

    def counting(self, mods, hashes):
        built.extend(hashes)
        real(self, mods, hashes)
        assert all(not np.isnan(self._features[h]).all() for h in hashes)  # they built

    monkeypatch.setattr(CompiledReranker, "_build", counting)
    report = run_tune(load_tune_config(overrides=_tune_overrides(
        tmp_path, f"metatune.checkpoint={REPO}/checkpoints/llvm-znver4-super.ckpt")))
    assert report["trials_run"] == 16
    assert len(built) == len(set(built)) > 0  # each candidate built once


def test_a_cache_file_keeps_what_another_process_wrote_meanwhile(tmp_path, monkeypatch):
    """Two processes building one workload's schedules (compile_features.py's workers) each
    write the file: the second keeps the first one's entries."""
    import json

    target = types.SimpleNamespace(kind=types.SimpleNamespace(name="llvm"))
    monkeypatch.setattr(compiled_code, "cache_folder", lambda cache_dir, t: str(tmp_path))
    path = tmp_path / "t__w.json"

    def build_while_another_writes(mod, t):
        path.write_text(json.dumps({"theirs": [1.0] * len(compiled_code.FEATURE_NAMES)}))
        return np.full(len(compiled_code.FEATURE_NAMES), 2.0)

    monkeypatch.setattr(compiled_code, "module_features", build_while_another_writes)
    cand = types.SimpleNamespace(sch=types.SimpleNamespace(mod=None))
    compiled_code.compiled_features("t/w", [cand], ["mine"], target, str(tmp_path))
    kept = json.loads(path.read_text())
    assert set(kept) == {"theirs", compiled_code._key("mine")}
