"""Which dataset and checkpoint a target uses when none is named (tuner.app.checkpoints), and
what the platforms' datasets and checkpoints say (tuner.engine.platforms)."""

from __future__ import annotations

import json
import os

import pytest
import tvm

import metatune.config
from metatune.config import FALLBACK_CHECKPOINT, SHIPPED_DATASET
from metatune.errors import ConfigError
from tuner.app.checkpoints import (
    checkpoint_note,
    choose_checkpoint,
    default_checkpoint_for,
    default_data_dir,
    own_data,
    own_train_command,
    trained_on,
)
from tuner.engine.platforms import dataset_kind, platform_id

HASWELL = tvm.target.Target({"kind": "llvm", "mcpu": "haswell"})


def _touch(path: str, text: str = "") -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def test_platform_names():
    assert platform_id(HASWELL) == "llvm-haswell"
    assert platform_id(tvm.target.Target("llvm")) == "llvm-generic"
    assert platform_id(tvm.target.Target({"kind": "cuda", "arch": "sm_80"})) == "cuda-sm_80"


def test_own_platform_first_else_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.setattr(metatune.config, "REPO_ROOT", str(tmp_path))
    shipped = tmp_path / "checkpoints" / f"{FALLBACK_CHECKPOINT}-super.ckpt"
    assert default_checkpoint_for(HASWELL, "super") == str(shipped)
    assert default_data_dir(HASWELL) == str(tmp_path / "data" / SHIPPED_DATASET)
    _touch(str(tmp_path / "checkpoints" / "llvm-haswell-super.ckpt"))
    _touch(str(tmp_path / "data" / "llvm-haswell" / "train" / "meta.json"), "{}")
    assert default_checkpoint_for(HASWELL, "super").endswith("llvm-haswell-super.ckpt")
    assert default_checkpoint_for(HASWELL, "plain") == str(
        tmp_path / "checkpoints" / f"{FALLBACK_CHECKPOINT}-plain.ckpt")
    assert default_data_dir(HASWELL) == str(tmp_path / "data" / "llvm-haswell")


def test_own_data_is_any_collected_split_of_the_targets_platform(tmp_path, monkeypatch):
    monkeypatch.setattr(metatune.config, "REPO_ROOT", str(tmp_path))
    assert own_data(HASWELL) is None
    os.makedirs(tmp_path / "data" / "llvm-haswell" / "heldout")  # begun, nothing written
    assert own_data(HASWELL) is None
    _touch(str(tmp_path / "data" / "llvm-haswell" / "train-networks" / "meta.json"), "{}")
    assert own_data(HASWELL) == os.path.join("data", "llvm-haswell")  # no train split needed


def test_the_note_trains_this_cpus_checkpoint_on_what_is_collected(tmp_path, monkeypatch):
    monkeypatch.setattr(metatune.config, "REPO_ROOT", str(tmp_path))
    own = tmp_path / "data" / "llvm-haswell"
    _touch(str(own / "heldout-nhwc" / "meta.json"), "{}")
    assert own_train_command(HASWELL, "super", None) is None  # held-out only: nothing to train
    # network splits only: beside what the loaded checkpoint was trained on, as shipped ones
    _touch(str(own / "train-networks-nhwc" / "meta.json"), "{}")
    other = tmp_path / "data" / "llvm-znver4"
    for split in ("train-networks", "train-nhwc"):
        _touch(str(other / split / "meta.json"), "{}")
    loaded = tmp_path / "checkpoints" / "llvm-znver4-super.ckpt"
    _touch(str(loaded.with_suffix(".json")), json.dumps(
        {"data": {"dir": "data/llvm-znver4", "splits": ["train-networks", "train-nhwc"]}}))
    assert own_train_command(HASWELL, "super", str(loaded)) == (
        "python train.py data_dir=data/llvm-haswell data.mixed_platforms=true "
        "'data.splits=[../llvm-znver4/train-networks,../llvm-znver4/train-nhwc,"
        "train-networks-nhwc]' graph=super")
    assert own_train_command(HASWELL, "plain", None) == (
        "python train.py data_dir=data/llvm-haswell 'data.splits=[train-networks-nhwc]' "
        "graph=plain")
    _touch(str(own / "train" / "meta.json"), "{}")  # a generated split: the dataset alone
    assert own_train_command(HASWELL, "super", str(loaded)) == (
        "python train.py data_dir=data/llvm-haswell 'data.splits=[train,train-networks-nhwc]' "
        "graph=super")


def test_another_target_kind_has_nothing_shipped():
    cuda = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    with pytest.raises(ConfigError, match="python collect.py run target=cuda"):
        default_checkpoint_for(cuda, "super")
    with pytest.raises(ConfigError, match="no dataset for target kind 'cuda'"):
        default_data_dir(cuda)


def test_dataset_kind_reads_meta_json(tmp_path):
    assert dataset_kind(str(tmp_path)) is None
    target = json.dumps({"kind": "llvm", "mcpu": "haswell"})
    _touch(str(tmp_path / "train" / "meta.json"), json.dumps({"target": target}))
    assert dataset_kind(str(tmp_path)) == "llvm"
    assert dataset_kind(str(tmp_path / "train")) == "llvm"
    _touch(str(tmp_path / "heldout" / "meta.json"), "not json")
    assert dataset_kind(str(tmp_path / "heldout")) is None


def test_the_run_names_the_checkpoint_and_data_it_uses(tmp_path, monkeypatch):
    from tuner.app.config import load_tune_config
    from tuner.app.preflight import with_model_sources
    from tuner.engine.targets import resolve_target

    info = resolve_target('{"kind": "llvm", "mcpu": "haswell"}')
    monkeypatch.setattr(metatune.config, "REPO_ROOT", str(tmp_path))
    cfg = with_model_sources(load_tune_config(overrides=["preset=meta-BO"]), info)
    assert cfg.metatune.checkpoint == str(tmp_path / "checkpoints" /
                                          f"{FALLBACK_CHECKPOINT}-plain.ckpt")
    cfg = with_model_sources(load_tune_config(overrides=["preset=xgb-Xfer"]), info)
    assert cfg.xfer.data == str(tmp_path / "data" / SHIPPED_DATASET / "train")
    named = load_tune_config(overrides=["metatune.checkpoint=/x.ckpt"])
    assert with_model_sources(named, info).metatune.checkpoint == "/x.ckpt"


def test_a_checkpoints_seeds_beside_it_make_the_default_ensemble(tmp_path, monkeypatch):
    from metatune.config import seed_siblings
    from tuner.app.config import load_tune_config
    from tuner.app.preflight import with_model_sources
    from tuner.engine.targets import resolve_target

    ckpt = tmp_path / "checkpoints" / "llvm-haswell-super.ckpt"
    for name in ("llvm-haswell-super.ckpt", "llvm-haswell-super-seed10.ckpt",
                 "llvm-haswell-super-seed02.ckpt", "llvm-haswell-super-seedx.ckpt",
                 "llvm-haswell-super-seed\u00b2.ckpt", "llvm-haswell-super-seed3.json",
                 "llvm-haswell-plain-seed1.ckpt"):
        _touch(str(tmp_path / "checkpoints" / name), "")
    seeds = [str(tmp_path / "checkpoints" / f"llvm-haswell-super-seed{n}.ckpt")
             for n in ("02", "10")]  # by seed, under their own names
    assert seed_siblings(str(ckpt)) == seeds
    assert seed_siblings(str(tmp_path / "none" / "x.ckpt")) == []
    info = resolve_target('{"kind": "llvm", "mcpu": "haswell"}')
    monkeypatch.setattr(metatune.config, "REPO_ROOT", str(tmp_path))
    assert with_model_sources(load_tune_config(), info).metatune.ensemble == seeds
    alone = load_tune_config(overrides=["metatune.ensemble=[]"])
    assert with_model_sources(alone, info).metatune.ensemble == []


def test_xgb_xfer_transfers_from_what_the_default_checkpoint_was_trained_on(tmp_path,
                                                                              monkeypatch):
    from tuner.app.checkpoints import default_xfer_data
    from tuner.engine.platforms import checkpoint_splits

    monkeypatch.setattr(metatune.config, "REPO_ROOT", str(tmp_path))
    own = tmp_path / "data" / "llvm-haswell"
    _touch(str(own / "train" / "meta.json"), "{}")
    # no sidecar beside the checkpoint: the platform's own train split, as before
    _touch(str(tmp_path / "checkpoints" / "llvm-haswell-super.ckpt"))
    assert default_xfer_data(HASWELL) == str(own / "train")
    sidecar = tmp_path / "checkpoints" / "llvm-haswell-super.json"
    _touch(str(sidecar), json.dumps({"data": {"dir": "data/llvm-haswell",
                                              "splits": ["../other/train", "net"]}}))
    assert checkpoint_splits(str(sidecar).replace(".json", ".ckpt")) is None  # not all here
    assert default_xfer_data(HASWELL) == str(own / "train")
    _touch(str(tmp_path / "data" / "other" / "train" / "meta.json"), "{}")
    _touch(str(own / "net" / "meta.json"), "{}")
    assert default_xfer_data(HASWELL) == [str(tmp_path / "data" / "other" / "train"),
                                          str(own / "net")]
    _touch(str(sidecar), "not json")
    assert default_xfer_data(HASWELL) == str(own / "train")


def test_the_choice_of_checkpoint_says_which_one_and_why(tmp_path, monkeypatch):
    from tuner.models.params import MetaTuneModelConfig

    monkeypatch.setattr(metatune.config, "REPO_ROOT", str(tmp_path))
    shipped = tmp_path / "checkpoints" / f"{FALLBACK_CHECKPOINT}-super.ckpt"
    _touch(str(shipped.with_suffix(".json")), json.dumps({"data": {
        "dir": "data/llvm-znver4", "splits": ["../llvm-icelake-server/train", "train-nhwc",
                                              "../llvm-rocketlake/train-networks"]}}))
    assert trained_on(str(shipped)) == "icelake-server, znver4 and rocketlake"
    choice = choose_checkpoint(HASWELL, "super")
    assert (choice.path, choice.why) == (str(shipped), "fallback")
    assert choice.line() == (f"checkpoint: checkpoints/{FALLBACK_CHECKPOINT}-super.ckpt (no "
                             "checkpoint of this CPU, haswell; the fallback pair, trained on "
                             "icelake-server, znver4 and rocketlake data)")
    plain = choose_checkpoint(HASWELL, "plain")  # no .json beside it: nothing said of its data
    assert plain.line().endswith("(no checkpoint of this CPU, haswell; the fallback pair)")
    own = tmp_path / "checkpoints" / "llvm-haswell-super.ckpt"
    _touch(str(own))
    assert choose_checkpoint(HASWELL, "super").line() == (
        "checkpoint: checkpoints/llvm-haswell-super.ckpt (this CPU's own, haswell)")
    assert choose_checkpoint(HASWELL, "super", "/x.ckpt").line() == (
        "checkpoint: /x.ckpt (named: metatune.checkpoint / --checkpoint)")
    assert checkpoint_note("metatune", MetaTuneModelConfig(), HASWELL) == (
        "checkpoint: checkpoints/llvm-haswell-super.ckpt (this CPU's own, haswell)")
    assert checkpoint_note("metatune", MetaTuneModelConfig(from_scratch=True), HASWELL) is None
    assert checkpoint_note("xgb", MetaTuneModelConfig(), HASWELL) is None


def test_tune_logs_the_checkpoint_it_took_first(tmp_path, monkeypatch, caplog):
    import dataclasses
    import logging

    import tuner.app.run as run
    from tuner.app.config import load_tune_config

    class Stop(Exception):
        """Ends the run once the line is logged."""

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(metatune.config, "REPO_ROOT", str(tmp_path))
    monkeypatch.setattr(run, "with_model_sources", stop)
    cfg = dataclasses.replace(load_tune_config(), target='{"kind": "llvm", "mcpu": "haswell"}')
    caplog.set_level(logging.INFO, logger="metatune")
    with pytest.raises(Stop):
        run.run_tune(cfg)
    assert (f"checkpoint: checkpoints/{FALLBACK_CHECKPOINT}-super.ckpt (no checkpoint of this "
            "CPU, haswell; the fallback pair)") in caplog.messages
