"""The tune configuration: a typed schema, YAML defaults and command-line overrides."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

from metatune.config import REPO_ROOT, merge_config
from metatune.errors import ConfigError
from tuner.models import COST_MODELS
from tuner.models.params import MetaTuneModelConfig, XferConfig
from tuner.search.params import SEARCHES, BOConfig
from tuner.search.zero_shot import PredictConfig

DEFAULT_TUNE_YAML = os.path.join(REPO_ROOT, "configs", "tune.yaml")


@dataclass
class SearchParams:
    """Keyword arguments of MetaSchedule's ``EvolutionarySearch`` (also BO's sampler),
    and the batch BO settings."""

    population_size: int = 256
    init_measured_ratio: float = 0.2
    init_min_unmeasured: int = 50
    max_fail_count: int = 5
    genetic_num_iters: int = 4
    genetic_mutate_prob: float = 0.85
    genetic_max_fail_count: int = 10
    eps_greedy: float = 0.05
    bo: BOConfig = field(default_factory=BOConfig)


@dataclass
class BuilderConfig:
    """Builder workers: count (``None``: one per core) and per-build time limit."""

    workers: Optional[int] = None
    timeout_sec: float = 30.0


@dataclass
class RunnerConfig:
    """How each candidate is timed (MetaSchedule ``EvaluatorConfig`` plus a time limit)."""

    timeout_sec: float = 30.0
    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 100
    enable_cpu_cache_flush: bool = False


@dataclass
class EvaluateConfig:
    """The final compile, correctness check and latency measurement."""

    enabled: bool = True
    check: bool = True
    rtol: float = 1e-3
    repeat: int = 10
    min_repeat_ms: int = 200
    untuned: bool = True
    untuned_repeat: int = 3
    torch: bool = True
    torch_compile: bool = False


#: The paper's framework names: preset -> the settings it stands for.
PRESETS: dict[str, dict[str, str]] = {
    "xgb": {"cost_model": "xgb", "search": "evolutionary"},
    "xgb-Xfer": {"cost_model": "xgb-xfer", "search": "evolutionary"},
    "meta-BO": {"cost_model": "metatune", "search": "bo", "metatune.graph": "plain"},
    "meta-BO-T": {"cost_model": "metatune", "search": "bo", "metatune.graph": "super"},
}


@dataclass
class TuneConfig:
    """Every setting of ``tune.py``; ``configs/tune.yaml`` holds the defaults."""

    network: Optional[str] = "alexnet"
    onnx: Optional[str] = None
    model: Optional[str] = None
    input_shape: Optional[list[int]] = None
    batch: int = 1
    fold_bn: bool = True
    pack_weights: bool = True
    target: str = "llvm"
    num_cores: Optional[int] = None
    work_dir: Optional[str] = None
    trials: int = 128
    trials_per_task: Optional[int] = None
    trials_per_round: int = 16
    seed: int = 0
    preset: Optional[str] = None
    cost_model: str = "metatune"
    search: str = "bo"
    search_params: SearchParams = field(default_factory=SearchParams)
    metatune: MetaTuneModelConfig = field(default_factory=MetaTuneModelConfig)
    xfer: XferConfig = field(default_factory=XferConfig)
    builder: BuilderConfig = field(default_factory=BuilderConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    predict_unmeasured: PredictConfig = field(default_factory=PredictConfig)
    max_failed_rounds: int = 3
    repair_db: bool = False
    progress: bool = True
    tensorboard: bool = True
    log_level: str = "INFO"


def load_tune_config(yaml_path: str | None = DEFAULT_TUNE_YAML,
                     overrides: list[str] | None = None) -> dict[str, Any]:
    """Merge the schema, the YAML defaults and ``key=value`` overrides; validate.

    Args:
        yaml_path: YAML file with defaults (``None``: the schema's defaults only).
        overrides: Dotlist overrides such as ``["trials=200", "runner.number=5"]``.

    Returns:
        The configuration as a plain dict.

    Raises:
        ConfigError: An unknown key, a value of the wrong type, or an invalid value.
    """
    plain = merge_config(TuneConfig, yaml_path, overrides, "tune")
    preset = plain["preset"]
    if preset is not None:
        canonical = {name.lower(): name for name in PRESETS}.get(str(preset).lower())
        if canonical is None:
            raise ConfigError(f"preset={preset!r}: choose one of {', '.join(PRESETS)} "
                              "(any case)")
        # The preset sits between the YAML defaults and the explicit overrides.
        implied = [f"{k}={v}" for k, v in PRESETS[canonical].items()]
        plain = merge_config(TuneConfig, yaml_path, implied + list(overrides or []), "tune")
        plain["preset"] = canonical
    for key in ("cost_model", "search"):  # names are case-insensitive: one spelling each
        plain[key] = str(plain[key]).lower()
    plain["metatune"]["graph"] = str(plain["metatune"]["graph"]).lower()
    validate(plain)
    return plain


def preset_of(cfg: dict[str, Any]) -> str | None:
    """The paper's name for a configuration's cost model and search, if it has one."""
    for name, settings in PRESETS.items():
        values = {"cost_model": cfg["cost_model"], "search": cfg["search"],
                  "metatune.graph": cfg["metatune"]["graph"]}
        if all(values[k] == v for k, v in settings.items()):
            return name
    return None


def validate(cfg: dict[str, Any]) -> None:
    """Check value ranges that the types alone do not.

    Raises:
        ConfigError: The first invalid value found, with what to do.
    """
    for key in ("trials", "trials_per_round"):
        if cfg[key] <= 0:
            raise ConfigError(f"{key}={cfg[key]}: the budget must be a positive number of trials")
    if cfg["trials_per_task"] is not None and cfg["trials_per_task"] <= 0:
        raise ConfigError(f"trials_per_task={cfg['trials_per_task']}: must be positive (or null)")
    if cfg["cost_model"] not in COST_MODELS:
        raise ConfigError(f"cost_model={cfg['cost_model']!r}: choose one of "
                          f"{', '.join(COST_MODELS)}")
    MetaTuneModelConfig(**cfg["metatune"])  # validates metatune.*
    BOConfig(**cfg["search_params"]["bo"])  # validates search_params.bo.*
    if cfg["search"] not in SEARCHES:
        raise ConfigError(f"search={cfg['search']!r}: choose one of {', '.join(SEARCHES)}")
    if not 0 <= cfg["seed"] < 2**31:
        raise ConfigError(f"seed={cfg['seed']}: give a seed from 0 to {2**31 - 1}")
    if cfg["batch"] <= 0:
        raise ConfigError(f"batch={cfg['batch']}: must be positive")
    if cfg["input_shape"] is not None and (
        not cfg["input_shape"] or any(d <= 0 for d in cfg["input_shape"])
    ):
        raise ConfigError(f"input_shape={cfg['input_shape']}: give positive dims, e.g. 3,224,224")
    pred = cfg["predict_unmeasured"]
    if min(pred["population"], pred["candidates"]) <= 0 or pred["genetic_iters"] < 0:
        raise ConfigError("predict_unmeasured: population and candidates must be positive, "
                          "genetic_iters not negative")
    if cfg["builder"]["timeout_sec"] <= 0 or cfg["runner"]["timeout_sec"] <= 0:
        raise ConfigError("builder/runner timeout_sec must be positive")
