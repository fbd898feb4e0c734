"""The cost models' settings (the tune configuration's ``metatune`` and ``xfer`` sections):
plain data with the one copy of their defaults, read by the configuration, the factory
(:func:`tuner.app.factories.make_cost_model`) and the models alike. Each validates itself
when it is made, so one that exists is valid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

from metatune.config import (
    DEFAULT_CACHE_DIR,
    DEFAULT_GRAPH,
    check_graph,
    resolve_path,
    seed_siblings,
)
from metatune.errors import ConfigError

#: Online fine-tuning's steps and step size (see :class:`MetaTuneModelConfig`).
ONLINE_STEPS, ONLINE_LR = 50, 0.05


@dataclass
class MetaTuneModelConfig:
    """The MetaTune cost model (``cost_model=metatune``).

    Attributes:
        checkpoint: The meta-trained network (``None``: the target's own platform's when
            this repository has it, else the shipped one of its kind; see
            :func:`tuner.app.checkpoints.default_checkpoint_for`); made absolute when set.
        graph: ``super`` or ``plain``: the graph mode the checkpoint was trained with.
        from_scratch: No checkpoint: start from random weights, learn online only.
        adapt_steps: Online fine-tuning steps after each measured round (None: the
            checkpoint's, the adaptation it was meta-trained for). 50, with ``adapt_lr``
            0.05, ten times meta-training's 5 steps at 0.01, as MAML itself adapts longer
            at test time than in its inner loop: chosen on the checkpoint's validation
            convs, where it ranks the next round's pool better
            (``docs/lab/search/adapt-in-tuning-val*.md``) and tunes a little better
            (``docs/lab/search/online-adapt*.md``).
        adapt_lr: Their step size (None: the checkpoint's). What adapts is the
            checkpoint's (its meta-training's scope).
        ensemble: More checkpoints of the same graph mode (e.g. other training seeds),
            averaged with ``checkpoint`` (:mod:`tuner.models.ensemble`; each adapts on its
            own); ``[]``: ``checkpoint`` alone; ``None``: its seed siblings
            (:func:`metatune.config.seed_siblings`, see :meth:`members`). Made absolute.
    """

    checkpoint: Optional[str] = None
    graph: str = DEFAULT_GRAPH
    from_scratch: bool = False
    adapt_steps: Optional[int] = ONLINE_STEPS  # null: the checkpoint's (meta-training's)
    adapt_lr: Optional[float] = ONLINE_LR  # null: the checkpoint's
    ensemble: Optional[List[str]] = None  # more checkpoints averaged with it (None: its seeds)

    def __post_init__(self) -> None:
        """Check the graph mode (one spelling) and the ensemble, and resolve the
        checkpoints' paths.

        Raises:
            ConfigError: An unknown graph mode, or an ensemble from scratch.
        """
        self.graph = check_graph(self.graph, "metatune.graph")
        if self.checkpoint:
            self.checkpoint = resolve_path(self.checkpoint)
        if self.ensemble is not None:
            self.ensemble = [resolve_path(str(c)) for c in self.ensemble]
        if self.ensemble and self.from_scratch:
            raise ConfigError("metatune.ensemble averages trained checkpoints, each adapted on "
                              "its own: it takes no metatune.from_scratch=true; drop one or "
                              "the other")

    def members(self, checkpoint: str | None) -> list[str]:
        """The checkpoints averaged with ``checkpoint``: ``ensemble`` when given, else the
        seeds shipped beside it (``<name>-seed<N>.ckpt``), none from scratch."""
        if self.ensemble is not None:
            return list(self.ensemble)
        if self.from_scratch or not checkpoint:
            return []
        return seed_siblings(checkpoint)


@dataclass
class XferConfig:
    """Where ``xgb-xfer`` finds its pre-training data and caches its base model.

    Attributes:
        data: A dataset split directory, or a list of them pre-trained on together
            (e.g. ``[data/llvm-icelake-server/train,data/llvm-rocketlake/train-networks]``,
            the data a checkpoint was trained on); ``None``: the splits the target's
            default checkpoint was trained on, else the ``train`` split of the target's own
            platform's dataset when it is here, else of the shipped one
            (:func:`tuner.app.checkpoints.default_xfer_data`).
        cache_dir: Where the pre-trained booster is cached (``None``: ``work/cache`` in
            the repository).
    """

    data: Any = None  # str | list[str] | None (OmegaConf types no unions)
    cache_dir: Optional[str] = None

    def __post_init__(self) -> None:
        """Make every path absolute (the defaults inside the repository; ``data`` is chosen
        for the target when the cost model is made).

        Raises:
            ConfigError: ``data`` is neither a path nor a non-empty list of paths.
        """
        if isinstance(self.data, (list, tuple)):
            if not self.data or not all(isinstance(d, str) and d for d in self.data):
                raise ConfigError(f"xfer.data={list(self.data)!r}: give a split directory "
                                  "or a list of them, e.g. xfer.data=[data/a/train,data/b/train]")
            self.data = [resolve_path(d) for d in self.data]
        elif self.data is not None and not isinstance(self.data, str):
            raise ConfigError(f"xfer.data={self.data!r}: give a split directory or a list of "
                              "them, e.g. xfer.data=[data/a/train,data/b/train]")
        else:
            self.data = resolve_path(self.data) if self.data else None
        self.cache_dir = resolve_path(self.cache_dir) if self.cache_dir else DEFAULT_CACHE_DIR
