"""What train.py trains on: splits of several platforms (on purpose only) and networks left
out for validation. Reads only ``meta.json`` files; no measurement."""

from __future__ import annotations

import json

import pytest

from datamodules.graphs import _without_networks
from lightning_modules.app import training_layouts, training_platform
from lightning_modules.config import DataConfig
from metatune.dataset import WorkloadSamples
from metatune.errors import ConfigError

ICELAKE = '{"kind": "llvm", "mcpu": "icelake-server"}'
ROCKETLAKE = '{"kind": "llvm", "mcpu": "rocketlake"}'


def _split(path, target: str, workloads: list[dict]) -> None:
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({
        "settings": {"target": target, "cpu": f"cpu of {target}", "cpu_flags": ["avx2"]},
        "workloads": workloads}))


@pytest.fixture
def two_platforms(tmp_path):
    """``a/train`` (icelake-server) and ``b/train-networks`` (rocketlake), two workloads of
    two networks in the latter (one shared by both)."""
    _split(tmp_path / "a" / "train", ICELAKE, [{"name": "conv2d_0", "kind": "conv2d"}])
    _split(tmp_path / "b" / "train-networks", ROCKETLAKE, [
        {"name": "net1/conv_a", "kind": "network-conv", "networks": ["net1"]},
        {"name": "net2/conv_b", "kind": "network-conv", "networks": ["net1", "net2"]},
        {"name": "net3/conv_c", "kind": "network-conv", "networks": ["net3"]}])
    return tmp_path


def test_splits_of_two_platforms_are_refused_unless_mixed_on_purpose(two_platforms):
    data_dir = str(two_platforms / "b")
    splits = ["../a/train", "train-networks"]
    with pytest.raises(ConfigError, match="data.mixed_platforms=true"):
        training_platform(data_dir, splits)
    platform = training_platform(data_dir, splits, mixed=True)
    # the checkpoint is named after data_dir, so its own split's platform comes first ...
    assert platform["target"] == ROCKETLAKE
    # ... and every split's platform is recorded
    assert [(p["split"], p["target"]) for p in platform["mixed"]] == [
        ("../a/train", ICELAKE), ("train-networks", ROCKETLAKE)]
    assert "mixed" not in training_platform(data_dir, ["train-networks"], mixed=True)


def test_the_checkpoint_records_the_layouts_its_convolutions_were_measured_in(two_platforms):
    nhwc = two_platforms / "b" / "train-networks-nhwc"
    nhwc.mkdir()
    (nhwc / "meta.json").write_text(json.dumps({"settings": {"target": ROCKETLAKE,
                                                             "layout": "NHWC"}}))
    data_dir = str(two_platforms / "b")
    assert training_layouts(data_dir, ["train-networks"]) == ["NCHW"]
    assert training_layouts(data_dir, ["../a/train", "train-networks-nhwc"]) == ["NCHW", "NHWC"]


def test_another_datasets_training_split_is_a_valid_split_name():
    assert DataConfig(splits=["../llvm-icelake-server/train", "train-networks"])
    with pytest.raises(ConfigError, match="held-out"):
        DataConfig(splits=["../llvm-icelake-server/heldout"])


def test_left_out_networks_take_every_workload_they_use(two_platforms):
    split = str(two_platforms / "b" / "train-networks")
    workloads = [WorkloadSamples(n, "network-conv")
                 for n in ("net1/conv_a", "net2/conv_b", "net3/conv_c")]
    kept = _without_networks(workloads, [split], ["net1"])
    assert [w.name for w in kept] == ["net3/conv_c"]  # net2/conv_b is net1's too
    with pytest.raises(ConfigError, match="netX uses no workload.*net1, net2, net3"):
        _without_networks(workloads, [split], ["netX"])


def test_a_model_trained_across_platforms_says_so_when_loaded():
    from tvm.target import Target

    from tuner.models.trained import TrainedModel

    model = TrainedModel(net=None, inner=None, graph="super", platform={
        "target": ROCKETLAKE, "mixed": [{"split": "../llvm-icelake-server/train",
                                         "target": ICELAKE},
                                        {"split": "train-networks", "target": ROCKETLAKE}]})
    here = Target({"kind": "llvm", "mcpu": "rocketlake"})
    note = model.platform_note(here)
    assert note and "several CPUs" in note and "-mcpu=icelake-server" in note
    assert model.covers(here) and "collect its data" not in note  # news, not a warning
    elsewhere = Target({"kind": "llvm", "mcpu": "znver4"})
    assert not model.covers(elsewhere) and "collect its data" in model.platform_note(elsewhere)
