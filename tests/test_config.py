"""Configuration: defaults, overrides, the typed result, the path rule and the errors for
bad keys and values."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from lightning_modules.config import TrainConfig, load_train_config
from metatune.config import (
    DEFAULT_GRAPH,
    REPO_ROOT,
    SHIPPED_DATASET,
    config_from,
    default_checkpoint,
)
from metatune.errors import ConfigError
from metatune.maml import AdaptConfig
from tuner.app.config import (
    BuilderConfig,
    RunnerConfig,
    SearchParams,
    TuneConfig,
    load_tune_config,
    with_round_budget,
)
from tuner.models.params import ONLINE_LR, ONLINE_STEPS, MetaTuneModelConfig, XferConfig
from tuner.search.params import BOConfig
from tuner.search.zero_shot import PredictConfig


def test_defaults_load_from_yaml():
    cfg = load_tune_config()
    assert cfg.network == "alexnet"
    assert cfg.target == "llvm"
    assert cfg.trials > 0 and cfg.search == "bo" and cfg.cost_model == "metatune"


def test_dotlist_overrides_change_nested_values():
    cfg = load_tune_config(overrides=["trials=7", "runner.number=5", "input_shape=[3,32,32]"])
    assert cfg.trials == 7 and cfg.runner.number == 5
    assert cfg.input_shape == [3, 32, 32]


def test_configs_are_typed_all_the_way_down():
    cfg = load_tune_config(overrides=["search_params.bo.carry=7"])
    assert type(cfg) is TuneConfig
    assert isinstance(cfg.search_params, SearchParams) and isinstance(cfg.search_params.bo,
                                                                      BOConfig)
    assert cfg.search_params.bo.carry == 7
    for section, kind in (("metatune", MetaTuneModelConfig), ("xfer", XferConfig),
                          ("builder", BuilderConfig), ("runner", RunnerConfig),
                          ("predict_unmeasured", PredictConfig)):
        assert isinstance(getattr(cfg, section), kind), section
    assert "bo" not in cfg.search_params.evolutionary()
    assert cfg.search_params.evolutionary()["population_size"] == 256


def test_yaml_files_list_the_schema_defaults():
    """The schemas hold the defaults; the YAML files only document them."""
    assert load_tune_config() == load_tune_config(None) == TuneConfig()
    assert load_train_config() == load_train_config(None) == TrainConfig()


def test_one_default_per_setting():
    tune, train = TuneConfig(), TrainConfig()
    assert tune.metatune.graph == train.graph == DEFAULT_GRAPH
    # train.py writes the user's own file, never the shipped one the tuner reads (issue 63)
    assert train.out == os.path.join(REPO_ROOT, "runs", "train",
                                     f"{SHIPPED_DATASET}-{DEFAULT_GRAPH}.ckpt")
    assert train.out != default_checkpoint(SHIPPED_DATASET, graph=DEFAULT_GRAPH)
    # the tuner adapts with the checkpoint's code, scope and loss, for longer (one default)
    assert (tune.metatune.adapt_steps, tune.metatune.adapt_lr) == (ONLINE_STEPS, ONLINE_LR)
    assert train.meta.adapt == AdaptConfig()


@pytest.mark.parametrize("override, message", [
    ("no_such_key=1", "no_such_key"),
    ("trials=many", "trials"),
    ("trials=0", "positive"),
    ("trials=-5", "positive"),
    ("trials_per_round=0", "positive"),
    ("rounds_per_task=0", "rounds_per_task"),
    ("cost_model=gbdt", "xgb"),
    ("search=annealing", "evolutionary"),
    ("search_params.bo.cold_population=-1", "cold_"),
    ("metatune.graph=fancy", "metatune.graph='fancy': choose super or plain"),
    ("predict_unmeasured.candidates=0", "predict_unmeasured"),
    ("runner.timeout_sec=0", "runner.timeout_sec"),
    ("builder.timeout_sec=-1", "builder.timeout_sec"),
    ("seed=-1", "seed"),
    ("input_shape=[3,0,4]", "input_shape"),
])
def test_bad_values_raise_config_error(override, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_tune_config(overrides=[override])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("override", [
    "metatune.blend_k0=64", "metatune.compiled_correction=true", "metatune.compiled_top=32",
    "metatune.adapt_scope=last_gcn", "search_params.bo.kernel=knobs",
])
def test_a_retired_tune_option_is_refused_as_retired(override, tmp_path):
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=f"{key} is retired: .*docs/.*da885ad") as err:
        load_tune_config(overrides=[override])
    assert "\n" not in str(err.value)
    old = tmp_path / "old.yaml"  # an old config file that still lists it, at its default
    section, name = key.rsplit(".", 1)
    old.write_text("".join(f"{'  ' * i}{part}:\n" for i, part in enumerate(section.split(".")))
                   + f"{'  ' * (section.count('.') + 1)}{name}: 0\n")
    with pytest.raises(ConfigError, match=f"{key} is retired"):
        load_tune_config(str(old))


@pytest.mark.parametrize("override", ["search_params.refine.enabled=true",
                                      "search_params.refine.candidates=8"])
def test_a_retired_section_is_refused_with_its_own_commit(override):
    from metatune.retired import RETIRED_AT

    with pytest.raises(ConfigError, match="search_params.refine.* is retired: .*held-out.*"
                       + RETIRED_AT["search_params.refine"]) as err:
        load_tune_config(overrides=[override])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("override, message", [
    ("meta.zero_shot_weight=1", "meta.zero_shot_weight is retired"),
    ("meta.adapt.context=32", "meta.adapt.context is retired"),
    ("meta.adapt.meta_sgd=true", "meta.adapt.meta_sgd is retired"),
    ("pretrain.top_weight=4", "pretrain.top_weight is retired"),
    ("meta.adapt.loss=list", "loss 'list' is retired"),
    ("pretrain.loss=rank", "loss 'rank' is retired"),
])
def test_a_retired_train_option_is_refused_as_retired(override, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_train_config(overrides=[override, "pretrain.per_workload=16"])
    assert "\n" not in str(err.value)


def test_sections_validate_themselves_when_made():
    with pytest.raises(ConfigError, match="metatune.graph"):
        MetaTuneModelConfig(graph="dense")
    with pytest.raises(ConfigError, match="predict_unmeasured"):
        PredictConfig(population=0)
    with pytest.raises(ConfigError, match="trials"):
        TuneConfig(trials=0)
    assert MetaTuneModelConfig(graph="PLAIN").graph == "plain"  # one spelling


def test_relative_paths_are_relative_to_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_tune_config(overrides=["work_dir=w", "metatune.checkpoint=m.ckpt",
                                      "xfer.data=d/llvm/train", "xfer.cache_dir=c",
                                      "onnx=net.onnx", "network=null"])
    assert cfg.work_dir == str(tmp_path / "w") and cfg.onnx == str(tmp_path / "net.onnx")
    assert cfg.metatune.checkpoint == str(tmp_path / "m.ckpt")
    assert (cfg.xfer.data, cfg.xfer.cache_dir) == (str(tmp_path / "d/llvm/train"),
                                                   str(tmp_path / "c"))
    train = load_train_config(overrides=["data_dir=d/arm", "cache_dir=c", "log_dir=r",
                                         "out=o.ckpt"])
    assert (train.data_dir, train.cache_dir, train.log_dir, train.out) == tuple(
        str(tmp_path / p) for p in ("d/arm", "c", "r", "o.ckpt"))
    assert load_train_config(overrides=["data_dir=d/arm", "graph=plain"]).out == \
        os.path.join(REPO_ROOT, "runs", "train", "arm-plain.ckpt")


def test_xfer_data_may_name_several_splits(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_tune_config(overrides=["xfer.data=[d/a/train,d/b/train-networks]"])
    assert cfg.xfer.data == [str(tmp_path / "d/a/train"), str(tmp_path / "d/b/train-networks")]
    for bad in ("xfer.data=[]", "xfer.data=3"):
        with pytest.raises(ConfigError, match="xfer.data=.*split directory"):
            load_tune_config(overrides=[bad])


def test_null_paths_are_the_repositorys_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_tune_config()
    assert cfg.work_dir is None and cfg.metatune.checkpoint is None  # decided at run time
    assert cfg.xfer.data is None  # chosen for the target (tuner.app.checkpoints)
    assert cfg.xfer.cache_dir == os.path.join(REPO_ROOT, "work", "cache")
    train = load_train_config()
    assert train.data_dir == os.path.join(REPO_ROOT, "data", SHIPPED_DATASET)
    assert train.log_dir == os.path.join(REPO_ROOT, "runs", "train")
    assert train.out == os.path.join(REPO_ROOT, "runs", "train", f"{SHIPPED_DATASET}-super.ckpt")


def test_a_partial_mapping_becomes_a_validated_config():
    cfg = config_from(TuneConfig, {"cost_model": "random", "search": "replay",
                                   "search_params": {}, "runner": {"number": 2}}, "tune")
    assert cfg.runner.number == 2 and cfg.runner.repeat == RunnerConfig().repeat
    assert isinstance(cfg.search_params.bo, BOConfig)
    with pytest.raises(ConfigError, match="nope"):
        config_from(TuneConfig, {"nope": 1}, "tune")
    with pytest.raises(ConfigError, match="search_params.bo.engine"):
        config_from(TuneConfig, {"search_params": {"bo": {"engine": "x"}}}, "tune")


def test_report_settings_are_plain_data():
    import json

    plain = dataclasses.asdict(load_tune_config(overrides=["input_shape=[3,8,8]"]))
    assert json.loads(json.dumps(plain)) == plain
    assert plain["search_params"]["bo"]["acquisition"] == "qlognei"


def test_collect_takes_a_target_dict_on_the_command_line():
    from tuner.app.collect_config import load_collect_config

    cfg = load_collect_config(overrides=['target={"kind": "llvm", "mcpu": "haswell"}'])
    assert json.loads(cfg.target) == {"kind": "llvm", "mcpu": "haswell"}
    assert load_collect_config(overrides=["target=llvm"]).target == "llvm"
    with pytest.raises(ConfigError, match="target dict"):
        load_collect_config(overrides=["target=[1, 2]"])


def test_rounds_per_task_becomes_a_budget_once_the_tasks_are_known():
    cfg = load_tune_config(overrides=["rounds_per_task=3", "trials_per_round=8"])
    assert with_round_budget(cfg, 5).trials == 3 * 8 * 5
    assert with_round_budget(cfg, 5).trials_per_task == 3 * 8
    plain = load_tune_config(overrides=["trials=40"])
    assert with_round_budget(plain, 5) is plain
    with pytest.raises(ConfigError, match="give one"):
        load_tune_config(overrides=["rounds_per_task=3", "trials_per_task=16"])
