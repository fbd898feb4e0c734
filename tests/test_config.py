"""Configuration: defaults, overrides and the errors for bad keys and values."""

from __future__ import annotations

import pytest

from metatune.errors import ConfigError
from tuner.app.config import load_tune_config


def test_defaults_load_from_yaml():
    cfg = load_tune_config()
    assert cfg["network"] == "alexnet"
    assert cfg["target"] == "llvm"
    assert cfg["trials"] > 0 and cfg["search"] == "bo" and cfg["cost_model"] == "metatune"


def test_dotlist_overrides_change_nested_values():
    cfg = load_tune_config(overrides=["trials=7", "runner.number=5", "input_shape=[3,32,32]"])
    assert cfg["trials"] == 7 and cfg["runner"]["number"] == 5
    assert cfg["input_shape"] == [3, 32, 32]


@pytest.mark.parametrize("override, message", [
    ("no_such_key=1", "no_such_key"),
    ("trials=many", "trials"),
    ("trials=0", "positive"),
    ("trials=-5", "positive"),
    ("trials_per_round=0", "positive"),
    ("cost_model=gbdt", "xgb"),
    ("search=annealing", "evolutionary"),
    ("search_params.bo.cold_population=-1", "cold_"),
])
def test_bad_values_raise_config_error(override, message):
    with pytest.raises(ConfigError, match=message):
        load_tune_config(overrides=[override])
