"""The tune configuration: one typed schema (:class:`TuneConfig`), YAML defaults and
command-line overrides, merged and validated once by :func:`load_tune_config`.

Every section is a dataclass that checks itself when it is made; the lower layers own
the sections they read (``metatune``, ``xfer``: :mod:`tuner.models.params`;
``search_params.bo`` and ``search_params.rl``: :mod:`tuner.search.params`; ``predict_unmeasured``:
:mod:`tuner.search.zero_shot`). Paths follow :mod:`metatune.config`'s one rule: relative
to the current directory, ``null`` for the repository's own location.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Optional

from metatune.config import REPO_ROOT, merge_config, resolve_path
from metatune.device import check_device_name
from metatune.errors import ConfigError
from tuner.engine.rpc import RPCSettings
from tuner.engine.tasks import Lowering
from tuner.models import COST_MODELS
from tuner.models.params import MetaTuneModelConfig, XferConfig
from tuner.search.params import SEARCHES, BOConfig, RLConfig
from tuner.search.zero_shot import PredictConfig

DEFAULT_TUNE_YAML = os.path.join(REPO_ROOT, "configs", "tune.yaml")
RUNNERS = ("local", "rpc")


@dataclass
class SearchParams:
    """Keyword arguments of MetaSchedule's ``EvolutionarySearch`` (also BO's sampler),
    the batch BO settings (``bo``) and the RL search's (``rl``). TVM checks the former when
    the search is made."""

    population_size: int = 256
    init_measured_ratio: float = 0.2
    init_min_unmeasured: int = 50
    max_fail_count: int = 5
    genetic_num_iters: int = 4
    genetic_mutate_prob: float = 0.85
    genetic_max_fail_count: int = 10
    eps_greedy: float = 0.05
    bo: BOConfig = field(default_factory=BOConfig)
    rl: RLConfig = field(default_factory=RLConfig)

    def evolutionary(self) -> dict[str, Any]:
        """The keyword arguments of ``EvolutionarySearch`` (every field but ``bo`` and
        ``rl``)."""
        kwargs = asdict(self)
        del kwargs["bo"], kwargs["rl"]
        return kwargs


@dataclass
class BuilderConfig:
    """Builder workers: count (``None``: one per core) and per-build time limit."""

    workers: Optional[int] = None
    timeout_sec: float = 30.0

    def __post_init__(self) -> None:
        """Check the time limit.

        Raises:
            ConfigError: ``timeout_sec`` is not positive.
        """
        _positive("builder.timeout_sec", self.timeout_sec)


@dataclass
class MemoryConfig:
    """The machine's tuning memory (docs/memory.md): a database per machine that every run
    reads and adds to; tasks it knows are not tuned again (:mod:`tuner.app.memory_run`)."""

    enabled: bool = True
    path: Optional[str] = None
    retune: bool = False
    copy_top: Optional[int] = None
    transfer: bool = True
    wait_seconds: float = 3600.0
    stale_claim_seconds: float = 600.0

    def __post_init__(self) -> None:
        """Resolve the path and check the numbers.

        Raises:
            ConfigError: ``copy_top`` or ``stale_claim_seconds`` is not positive, or
                ``wait_seconds`` is negative.
        """
        if self.path:
            self.path = resolve_path(self.path)
        if self.copy_top is not None:
            _positive("memory.copy_top", self.copy_top)
        _positive("memory.stale_claim_seconds", self.stale_claim_seconds)
        if self.wait_seconds < 0:
            raise ConfigError(f"memory.wait_seconds={self.wait_seconds}: must be 0 or more")


@dataclass
class RunnerConfig:
    """Where and how each candidate is timed: ``local`` (this machine) or ``rpc`` (servers
    behind a TVM RPC tracker, ``rpc``), with MetaSchedule's ``EvaluatorConfig`` settings
    and a time limit."""

    kind: str = "local"
    rpc: RPCSettings = field(default_factory=RPCSettings)
    timeout_sec: float = 30.0
    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 100
    enable_cpu_cache_flush: bool = False

    def __post_init__(self) -> None:
        """Check the time limit and the runner kind.

        Raises:
            ConfigError: ``timeout_sec`` is not positive, or an unknown ``kind``.
        """
        _positive("runner.timeout_sec", self.timeout_sec)
        self.kind = str(self.kind).lower()
        if self.kind not in RUNNERS:
            raise ConfigError(f"runner.kind={self.kind!r}: choose one of {', '.join(RUNNERS)}")


@dataclass
class EvaluateConfig:
    """The final compile, correctness check and latency measurement."""

    enabled: bool = True
    check: bool = True
    rtol: float = 1e-3
    repeat: int = 10
    min_repeat_ms: int = 200
    rounds: int = 5
    untuned: bool = True
    untuned_repeat: int = 3
    torch: bool = True
    torch_compile: bool = False
    # Where the network is run and timed: ``local`` (here) or ``rpc`` (uploaded to a server
    # of ``runner.rpc``); ``None``: where tuning measured (``runner.kind``).
    runner: Optional[str] = None

    def __post_init__(self) -> None:
        """Check the timing settings.

        Raises:
            ConfigError: ``repeat``, ``rounds`` or ``untuned_repeat`` is not positive, or an
                unknown ``runner``.
        """
        for key in ("repeat", "rounds", "untuned_repeat"):
            _positive(f"evaluate.{key}", getattr(self, key))
        if self.runner is not None:
            self.runner = str(self.runner).lower()
            if self.runner not in RUNNERS:
                raise ConfigError(f"evaluate.runner={self.runner!r}: choose one of "
                                  f"{', '.join(RUNNERS)}, or null (where tuning measured)")

    def where(self, runner: RunnerConfig) -> str:
        """Where the network is timed: ``runner`` (this setting), else ``runner.kind``."""
        return self.runner or runner.kind


#: The paper's framework names: preset -> the settings it stands for. Presets keep the
#: paper's spelling (any case on input); cost models and searches are lower case.
PRESETS: dict[str, dict[str, str]] = {
    "xgb": {"cost_model": "xgb", "search": "evolutionary"},
    "xgb-Xfer": {"cost_model": "xgb-xfer", "search": "evolutionary"},
    "RL": {"cost_model": "xgb", "search": "rl"},
    "meta-BO": {"cost_model": "metatune", "search": "bo", "metatune.graph": "plain"},
    "meta-BO-T": {"cost_model": "metatune", "search": "bo", "metatune.graph": "super"},
    "meta-RL": {"cost_model": "metatune", "search": "rl", "metatune.graph": "plain"},
    "meta-RL-T": {"cost_model": "metatune", "search": "rl", "metatune.graph": "super"},
}


@dataclass
class TuneConfig:
    """Every setting of ``tune.py``, with its default; ``configs/tune.yaml`` documents them.

    Made (by :func:`load_tune_config`, or directly), it is checked and normalized once:
    names in their one spelling (lower case; the preset as :data:`PRESETS` spells it),
    ``onnx`` and ``work_dir`` absolute (``work_dir`` ``None``: ``work/<network>`` in the
    repository, see :func:`tuner.app.run.default_work_dir`).
    """

    network: Optional[str] = "alexnet"
    onnx: Optional[str] = None
    model: Optional[str] = None
    input_shape: Optional[list[int]] = None
    batch: int = 1
    fold_bn: bool = True
    pack_weights: bool = True
    layout: str = "NHWC"  # chosen on selection networks: docs/lab/compile/layout-ab.md
    precision: str = "fp32"  # fp32 | bf16: tuner/engine/precision.py, docs/precision.md
    target: str = "llvm"
    num_cores: Optional[int] = None
    work_dir: Optional[str] = None
    export: Optional[str] = None  # after tuning: the artifact directory (tuner/app/export.py)
    export_overwrite: bool = False
    trials: int = 128
    trials_per_task: Optional[int] = None
    trials_per_round: int = 16
    # A task's first round in a run (None: trials_per_round); set, tasks measured that many
    # times skip the first pass (tuner/engine/scheduler.py).
    first_round_trials: Optional[int] = None
    # The budget as rounds of every task: once the tasks are known it sets ``trials`` to
    # rounds x trials_per_round x tasks and ``trials_per_task`` to rounds x trials_per_round.
    rounds_per_task: Optional[int] = None
    seed: int = 0
    preset: Optional[str] = None
    cost_model: str = "metatune"
    search: str = "bo"
    search_params: SearchParams = field(default_factory=SearchParams)
    device: str = "auto"
    metatune: MetaTuneModelConfig = field(default_factory=MetaTuneModelConfig)
    xfer: XferConfig = field(default_factory=XferConfig)
    builder: BuilderConfig = field(default_factory=BuilderConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    predict_unmeasured: PredictConfig = field(default_factory=PredictConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    max_failed_rounds: int = 3
    repair_db: bool = False
    progress: bool = True
    tensorboard: bool = True
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        """Normalize the names and paths and check the values the types alone do not
        (the sections checked themselves when they were made).

        Raises:
            ConfigError: The first invalid value found, with what to do.
        """
        self.preset = canonical_preset(self.preset)
        self.cost_model = str(self.cost_model).lower()  # names ignore case: one spelling
        self.search = str(self.search).lower()
        self.device = check_device_name(self.device)
        self.layout = str(self.layout).upper()
        self.precision = str(self.precision).lower()
        Lowering(self.pack_weights, self.layout, self.precision)  # checks layout, precision
        if self.onnx:
            self.onnx = resolve_path(self.onnx)
        if self.work_dir:
            self.work_dir = resolve_path(self.work_dir)
        if self.export:
            self.export = resolve_path(self.export)
        for key in ("trials", "trials_per_round"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{key}={getattr(self, key)}: the budget must be a positive "
                                  "number of trials")
        if self.first_round_trials is not None and self.first_round_trials <= 0:
            raise ConfigError(f"first_round_trials={self.first_round_trials}: must be positive "
                              "(or null: trials_per_round)")
        if self.trials_per_task is not None and self.trials_per_task <= 0:
            raise ConfigError(f"trials_per_task={self.trials_per_task}: must be positive "
                              "(or null)")
        if self.rounds_per_task is not None:
            if self.rounds_per_task <= 0:
                raise ConfigError(f"rounds_per_task={self.rounds_per_task}: must be positive "
                                  "(or null)")
            per_task = self.rounds_per_task * self.trials_per_round
            if self.trials_per_task not in (None, per_task):
                raise ConfigError(f"rounds_per_task={self.rounds_per_task} and trials_per_task="
                                  f"{self.trials_per_task}: give one (rounds_per_task sets the "
                                  "per-task cap to rounds x trials_per_round)")
        if self.cost_model not in COST_MODELS:
            raise ConfigError(f"cost_model={self.cost_model!r}: choose one of "
                              f"{', '.join(COST_MODELS)}")
        if self.search not in SEARCHES:
            raise ConfigError(f"search={self.search!r}: choose one of {', '.join(SEARCHES)}")
        if not 0 <= self.seed < 2**31:
            raise ConfigError(f"seed={self.seed}: give a seed from 0 to {2**31 - 1}")
        _positive("batch", self.batch)
        if self.input_shape is not None and (
            not self.input_shape or any(d <= 0 for d in self.input_shape)
        ):
            raise ConfigError(f"input_shape={self.input_shape}: give positive dims, e.g. "
                              "3,224,224")


def _positive(key: str, value: float) -> None:
    """Refuse a setting that must be positive.

    Raises:
        ConfigError: ``value`` is not positive, naming ``key``.
    """
    if value <= 0:
        raise ConfigError(f"{key}={value}: must be positive")


def canonical_preset(name: str | None) -> str | None:
    """A preset name as :data:`PRESETS` spells it (names ignore case).

    Raises:
        ConfigError: Not a preset.
    """
    if name is None:
        return None
    canonical = {p.lower(): p for p in PRESETS}.get(str(name).lower())
    if canonical is None:
        raise ConfigError(f"preset={name!r}: choose one of {', '.join(PRESETS)} (any case)")
    return canonical


def preset_overrides(merged: Any) -> list[str]:
    """The settings the merged configuration's preset stands for, as dotlist overrides."""
    preset = canonical_preset(merged.preset)
    return [] if preset is None else [f"{k}={v}" for k, v in PRESETS[preset].items()]


def load_tune_config(yaml_path: str | None = DEFAULT_TUNE_YAML,
                     overrides: list[str] | None = None) -> TuneConfig:
    """Merge the schema, the YAML defaults and ``key=value`` overrides; validate once.

    A preset sits between the YAML defaults and the explicit overrides: ``preset=xgb
    search=replay`` is xgb's cost model with the replay search.

    Args:
        yaml_path: YAML file with defaults (``None``: the schema's defaults only).
        overrides: Dotlist overrides such as ``["trials=200", "runner.number=5"]``.

    Returns:
        The typed configuration.

    Raises:
        ConfigError: An unknown key, a value of the wrong type, or an invalid value.
    """
    return merge_config(TuneConfig, yaml_path, overrides, "tune", implied=preset_overrides)


def preset_for(cost_model: str, search: str, graph: str | None) -> str | None:
    """The paper's name for a cost model, search and graph mode, if they have one."""
    values = {"cost_model": cost_model, "search": search, "metatune.graph": graph}
    for name, settings in PRESETS.items():
        if all(values[k] == v for k, v in settings.items()):
            return name
    return None


def preset_of(cfg: TuneConfig) -> str | None:
    """The paper's name for a configuration's cost model and search, if it has one."""
    return preset_for(cfg.cost_model, cfg.search, cfg.metatune.graph)


def with_round_budget(cfg: TuneConfig, num_tasks: int) -> TuneConfig:
    """The configuration with ``rounds_per_task`` turned into trials, now that the network's
    tasks are known; unchanged when it is not set.

    Args:
        cfg: The tune configuration.
        num_tasks: How many tasks the network has.

    Returns:
        ``cfg`` with ``trials = rounds_per_task * trials_per_round * num_tasks`` and
        ``trials_per_task = rounds_per_task * trials_per_round``, so that every task gets
        that many full rounds (fewer where its design space runs out).
    """
    if cfg.rounds_per_task is None:
        return cfg
    per_task = cfg.rounds_per_task * cfg.trials_per_round
    return replace(cfg, trials=per_task * max(1, num_tasks), trials_per_task=per_task)
