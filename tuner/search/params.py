"""The searches' names and the settings of the batch BO and RL searches: plain data, read by
the tune configuration (:mod:`tuner.app.config`) and the searches alike, without importing
either."""

from __future__ import annotations

from dataclasses import dataclass

from metatune.errors import ConfigError

#: The searches ``search=`` may name (see :func:`tuner.app.factories.make_search`).
SEARCHES = ("bo", "rl", "evolutionary", "replay")
#: The batch acquisitions of :func:`tuner.search.bo_select.select_batch` (``model``: the
#: cost model's top ``q``, no GP: the baseline that tells what the GP's exploration adds).
ACQUISITIONS = ("qlognei", "qucb", "model")
#: The batch selection engines of :func:`tuner.search.bo_select.select_batch`.
ENGINES = ("joint", "botorch")


@dataclass
class BOConfig:
    """Settings of the batch BO search (:class:`tuner.search.bo.BatchBOSearch`).

    Attributes:
        pool_size: Candidates the evolutionary sampler proposes per round.
        population: The sampler's evolutionary population (smaller than a plain
            evolutionary search's: it proposes, BO chooses).
        genetic_iters: The sampler's evolution rounds per proposal.
        carry: Unchosen candidates kept for the next round.
        acquisition: ``qlognei``, ``qucb``, or ``model`` (the pool's top by the adapted
            cost model, without a GP).
        engine: ``joint`` or ``botorch`` (see :func:`tuner.search.bo_select.select_batch`).
        mc_samples: Quasi-Monte-Carlo samples of the acquisition.
        beta: ``qucb`` exploration weight.
        max_history: Measurements the GP is fitted on (the best half and the latest).
        cold_population: The sampler's population while the task has no measurement yet
            (the cost model is then the only guide, so it may search more); 0: ``population``.
        cold_genetic_iters: The sampler's evolution rounds while the task has no measurement
            yet; 0: ``genetic_iters``.
    """

    pool_size: int = 96
    population: int = 96
    genetic_iters: int = 1
    carry: int = 128
    acquisition: str = "qlognei"
    engine: str = "joint"
    mc_samples: int = 128
    beta: float = 0.2
    max_history: int = 256
    cold_population: int = 0
    cold_genetic_iters: int = 0

    def __post_init__(self) -> None:
        """Check the settings: a ``BOConfig`` that exists is valid.

        Raises:
            ConfigError: The first invalid setting, with what to do.
        """
        if self.acquisition not in ACQUISITIONS:
            raise ConfigError(f"search_params.bo.acquisition={self.acquisition!r}: choose "
                              f"{' or '.join(ACQUISITIONS)}")
        if self.engine not in ENGINES:
            raise ConfigError(f"search_params.bo.engine={self.engine!r}: choose "
                              f"{' or '.join(ENGINES)}")
        if min(self.pool_size, self.population, self.mc_samples) <= 0 or self.max_history < 4 \
                or min(self.genetic_iters, self.carry, self.cold_population,
                       self.cold_genetic_iters) < 0:
            raise ConfigError("search_params.bo: pool_size, population and mc_samples must be "
                              "positive, genetic_iters, carry and the cold_* settings not "
                              "negative, max_history >= 4")


@dataclass
class RLConfig:
    """Settings of the RL search after Chameleon (:class:`tuner.search.rl.RLSearch`).

    Attributes:
        rollouts: Rollouts per round, each from its own start point.
        best_starts: Share of the rollouts that start from the best measured points (the
            rest start from random points; all are random before the first measurement).
        best_pool: The best measured points those starts are drawn from (the best one
            always, the others at random among the ``best_pool`` best).
        stay_prior: The untrained policy's probability of leaving a decision as it is
            (1/3: uniform over down / stay / up; higher makes each step a smaller, more
            local move, as a mutation of one or two decisions is).
        max_steps: Steps a rollout takes at most.
        stop_stay: A rollout stops once at least this share of its movable decisions stay.
        keep: Unmeasured candidates of the round, best predicted first, that the sampler
            clusters (at least the batch size).
        min_clusters: The fewest clusters (so candidates measured) a round's sampler picks
            by the knee; at most the batch size.
        hidden: Width of the actor-critic's two hidden layers.
        lr: Adam step size of the PPO update.
        epochs: PPO epochs over each round's rollouts.
        clip: PPO's ratio clip.
        gamma: Discount of future rewards.
        gae_lambda: GAE's lambda.
        entropy: Weight of the entropy bonus.
    """

    rollouts: int = 8
    best_starts: float = 0.5
    best_pool: int = 4
    stay_prior: float = 1.0 / 3.0
    max_steps: int = 6
    stop_stay: float = 0.8
    keep: int = 64
    min_clusters: int = 4
    hidden: int = 64
    lr: float = 3e-3
    epochs: int = 4
    clip: float = 0.2
    gamma: float = 0.9
    gae_lambda: float = 0.95
    entropy: float = 0.01

    def __post_init__(self) -> None:
        """Check the settings: an ``RLConfig`` that exists is valid.

        Raises:
            ConfigError: The first invalid setting, with what to do.
        """
        if min(self.rollouts, self.max_steps, self.keep, self.min_clusters, self.hidden,
               self.epochs, self.best_pool) <= 0:
            raise ConfigError("search_params.rl: rollouts, max_steps, keep, min_clusters, "
                              "hidden, epochs and best_pool must be positive")
        if not 0.0 < self.stay_prior < 1.0:
            raise ConfigError(f"search_params.rl.stay_prior={self.stay_prior}: give a "
                              "probability between 0 and 1 (1/3: uniform moves)")
        for key in ("best_starts", "stop_stay", "gamma", "gae_lambda"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ConfigError(f"search_params.rl.{key}={getattr(self, key)}: give a "
                                  "number from 0 to 1")
        if self.lr <= 0 or self.clip <= 0 or self.entropy < 0:
            raise ConfigError("search_params.rl: lr and clip must be positive, entropy not "
                              "negative")
