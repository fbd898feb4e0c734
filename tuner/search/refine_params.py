"""The settings of local refinement (``search_params.refine``): plain data, read by the tune
configuration (:mod:`tuner.app.config`) and :mod:`tuner.search.refine` alike, without
importing either."""

from __future__ import annotations

from dataclasses import dataclass, field

from metatune.errors import ConfigError


@dataclass
class RefineConfig:
    """Settings of local refinement around each task's best (:mod:`tuner.search.refine`).

    Attributes:
        enabled: Add neighbours of the task's best measured schedules to each round
            (off by default until an A/B on validation tasks says it helps).
        searches: The searches it wraps when enabled (``search``'s names): BO only by
            default, the search it was measured with (MetaSchedule's evolutionary search,
            preset ``xgb``, stays MetaSchedule's own).
        candidates: Neighbours put in a round at most, best predicted first.
        max_share: And at most this share of the round's batch (``floor(share * batch)``
            slots; the neighbours are spread through the batch so that any cut of the
            round keeps that share).
        from_best: Measured schedules whose neighbourhoods a round looks at: the best ones
            whose one-step neighbours are not all measured yet (coordinate descent moves on
            from a local optimum to the next best).
        pool: Unmeasured neighbours the cost model scores per round at most, and new
            neighbours replayed per round at most (replays are kept for later rounds).
    """

    enabled: bool = False
    searches: list[str] = field(default_factory=lambda: ["bo"])
    candidates: int = 4
    max_share: float = 0.25
    from_best: int = 2
    pool: int = 32

    def __post_init__(self) -> None:
        """Check the settings: a ``RefineConfig`` that exists is valid.

        Raises:
            ConfigError: The first invalid setting, with what to do.
        """
        if not 0.0 <= float(self.max_share) <= 1.0:
            raise ConfigError(f"search_params.refine.max_share={self.max_share}: give a "
                              "fraction of the round in [0, 1]")
        if self.candidates < 0 or self.from_best < 1 or self.pool < 1:
            raise ConfigError("search_params.refine: candidates must not be negative, "
                              "from_best and pool must be positive")

    def room(self, batch: int) -> int:
        """Neighbours a round of ``batch`` candidates may hold."""
        return max(0, min(int(self.candidates), int(self.max_share * int(batch) + 1e-9)))
