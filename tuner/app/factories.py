"""A cost model, a search and a runner by name: the factories a tuning session is built from
(:func:`tuner.app.session.build_session`), with the configuration's typed sections."""

from __future__ import annotations

import functools
import logging
import os

from metatune.config import DEFAULT_DATA_DIR, default_checkpoint
from metatune.dataset import as_split_dirs
from metatune.device import resolve_device
from metatune.errors import ConfigError
from tuner.app.checkpoints import (
    default_checkpoint_for,
    default_xfer_data,
    own_checkpoint,
    own_train_command,
)
from tuner.app.config import RunnerConfig, SearchParams
from tuner.engine.intrinsics import worker_initializer
from tuner.engine.norepeat import NoRepeatSearch
from tuner.engine.platforms import dataset_kind
from tuner.engine.rpc_watch import make_rpc_runner
from tuner.models import COST_MODELS
from tuner.models.cost_model import MetaTuneCostModel
from tuner.models.ensemble import EnsembleCostModel
from tuner.models.mlp import make_mlp_model
from tuner.models.params import MetaTuneModelConfig, XferConfig
from tuner.models.trained import load_model
from tuner.models.xgb_transfer import XferXGBModel, base_booster
from tuner.search.bo import BatchBOSearch
from tuner.search.params import SEARCHES
from tuner.search.rl import RLSearch

logger = logging.getLogger(__name__)


def make_cost_model(name: str, *, num_cores: int, metatune: MetaTuneModelConfig | None = None,
                    xfer: XferConfig | None = None, target=None, device: str = "auto",
                    layout: str | None = None):
    """A cost model by name: ``metatune``, MetaSchedule's ``xgb``, ``mlp``, ``random``, or
    ``xgb-xfer`` (XGBoost with transfer from the dataset's training split).

    Args:
        name: The cost model.
        num_cores: Cores XGBoost may use.
        metatune: The ``metatune`` section (checkpoint, graph, ...; ``None``: its defaults).
        xfer: The ``xfer`` section (``data``, ``cache_dir``) for ``xgb-xfer`` (``None``:
            its defaults).
        target: The ``tvm.target.Target`` (``xgb-xfer`` extracts features for it).
        device: Where MetaTune's GCN embeds and fine-tunes (:mod:`metatune.device`).
        layout: The data layout the tasks' convolutions are extracted in (``metatune``
            notes when its training data has none of that layout).

    Raises:
        ConfigError: Unknown name.
        tuner.models.cost_model.CheckpointError: ``metatune`` without a loadable checkpoint.
        tuner.models.xgb_transfer.XferError: ``xgb-xfer`` without training data.
    """
    from tvm.s_tir import meta_schedule as ms

    if name not in COST_MODELS:
        raise ConfigError(f"unknown cost_model {name!r}: choose one of {', '.join(COST_MODELS)}")
    if name == "metatune":
        m = metatune or MetaTuneModelConfig()
        checkpoint, *paths = metatune_checkpoints(m, target)
        model = load_model(checkpoint, graph=m.graph, from_scratch=bool(m.from_scratch))
        more = [load_model(c, graph=m.graph) for c in paths]
        for member in [model, *more]:
            member.inner.override(steps=m.adapt_steps, lr=m.adapt_lr)
        if target is not None:
            own = own_checkpoint(target, m.graph)
            if own and checkpoint and os.path.exists(checkpoint) and os.path.samefile(
                    own, checkpoint):
                own = None  # it is the one loaded
            note = model.platform_note(
                target, own_checkpoint=own,
                train_command=None if own else own_train_command(target, m.graph, checkpoint))
            if note:  # a warning only when none of its data is of this CPU
                logger.log(logging.INFO if model.covers(target) else logging.WARNING,
                           "%s", note)
        if layout and (note := model.layout_note(layout)):
            logger.info("%s", note)
        if more:
            logger.info("cost model: the mean of %d checkpoints (%s)", 1 + len(more),
                        ", ".join(os.path.basename(c) for c in [checkpoint, *paths]))
            return EnsembleCostModel(models=[model, *more], graph=m.graph,
                                     device=resolve_device(device))
        return MetaTuneCostModel(model=model, graph=m.graph, device=resolve_device(device))
    if name == "xgb":
        return ms.cost_model.CostModel.create("xgb", num_tuning_cores=num_cores)
    if name == "xgb-xfer":
        x = xfer or XferConfig()
        # absolute when given (resolved when the section was made); else the platform's
        data = x.data or (default_xfer_data(target) if target is not None
                          else os.path.join(DEFAULT_DATA_DIR, "train"))
        kind = str(target.kind.name) if target is not None else "llvm"
        for split in as_split_dirs(data):
            measured = dataset_kind(split)
            if measured not in (kind, None):
                raise ConfigError(
                    f"xgb-xfer pre-trains on {split}, measured for target kind {measured}, "
                    f"not {kind}: collect data for {kind} (python collect.py run "
                    f"target={kind}); a dataset of the target's own platform is then found "
                    "by itself")
        base = base_booster(data, target, num_cores, x.cache_dir)
        return XferXGBModel(base=base, num_tuning_cores=num_cores)
    if name == "mlp":
        return make_mlp_model()
    return ms.cost_model.CostModel.create(name)


def metatune_checkpoints(m: MetaTuneModelConfig, target=None) -> list:
    """The checkpoints the MetaTune cost model loads: ``m.checkpoint`` (else the target's
    own platform's, else the shipped one of its kind; ``None`` from scratch), then those
    averaged with it (its seed siblings by default)."""
    checkpoint = m.checkpoint or (default_checkpoint_for(target, m.graph)
                                  if target is not None else default_checkpoint(graph=m.graph))
    return [checkpoint, *m.members(checkpoint)]


def make_search(name: str, params: SearchParams | None = None, *, clock=None, seed: int = 0,
                budget=None, device: str = "auto"):
    """A search strategy by name, wrapped to never measure a schedule twice.

    Args:
        name: ``bo`` (:class:`tuner.search.bo.BatchBOSearch`), ``rl``
            (:class:`tuner.search.rl.RLSearch`), or MetaSchedule's ``evolutionary`` or
            ``replay``.
        params: The ``search_params`` section: ``EvolutionarySearch`` keyword arguments,
            ``bo`` and ``rl`` (a :class:`tuner.search.params.BOConfig` and
            :class:`tuner.search.params.RLConfig`, valid since they were made; ``None``:
            the defaults).
        clock: A :class:`tuner.app.rounds.RoundClock` timing each search.
        seed: Seed of the BO sampler and of the RL search.
        budget: The run's :class:`tuner.engine.scheduler.RoundBudget` (cuts each round to
            the size the scheduler sets).
        device: Where BO's GP runs (:mod:`metatune.device`).

    Raises:
        ConfigError: Unknown name or parameter.
    """
    from tvm.s_tir import meta_schedule as ms

    params = params or SearchParams()
    evolutionary = params.evolutionary()
    if name == "bo":
        try:
            ms.search_strategy.EvolutionarySearch(**evolutionary)  # TVM checks the sampler's
        except (TypeError, ValueError) as err:
            raise ConfigError(f"search_params: {err}") from err
        return NoRepeatSearch(BatchBOSearch(evolutionary, params.bo, seed, device),
                              clock=clock, budget=budget)
    if name == "rl":
        return NoRepeatSearch(RLSearch(params.rl, seed, device), clock=clock, budget=budget)
    if name == "evolutionary":
        try:
            return NoRepeatSearch(ms.search_strategy.EvolutionarySearch(**evolutionary),
                                  clock=clock, budget=budget)
        except TypeError as err:
            raise ConfigError(f"search_params: {err}") from err
    if name == "replay":
        return NoRepeatSearch(ms.search_strategy.ReplayTrace(), clock=clock, budget=budget)
    raise ConfigError(f"unknown search {name!r}: choose one of {', '.join(SEARCHES)}")


def make_runner(cfg: RunnerConfig, target_kinds: tuple[str, ...], num_threads: int):
    """MetaSchedule's LocalRunner with a pre-initialized persistent worker, or its RPCRunner
    on the servers behind a tracker (``runner.kind=rpc``).

    Args:
        cfg: The ``runner`` section.
        target_kinds: Target kinds whose tensor intrinsics the worker registers.
        num_threads: Threads of the worker's TVM runtime: the target's cores, so that
            candidates are timed the way the tuned network will run.

    Raises:
        RunnerUnavailableError: ``rpc`` without a tracker or a server under the key.
    """
    from tvm.s_tir import meta_schedule as ms

    evaluator = ms.runner.EvaluatorConfig(
        number=cfg.number, repeat=cfg.repeat, min_repeat_ms=cfg.min_repeat_ms,
        enable_cpu_cache_flush=cfg.enable_cpu_cache_flush,
    )
    if cfg.kind == "rpc":  # the servers time with their own runtime's threads
        return make_rpc_runner(cfg.rpc, evaluator,
                               initializer=functools.partial(worker_initializer, target_kinds,
                                                             int(num_threads)))
    return ms.runner.LocalRunner(
        timeout_sec=cfg.timeout_sec, evaluator_config=evaluator,
        initializer=functools.partial(worker_initializer, target_kinds, int(num_threads)),
    )
