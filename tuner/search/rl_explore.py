"""Adaptive exploration (Chameleon): rollouts of the actor-critic through the decision
space, rewarded by the cost model, and a PPO update after each round.

A round starts one rollout from each start point. At every step the policy moves each of
a point's decisions down, not at all, or up; a move to an invalid point (one that does
not build, or failed when measured) leaves the rollout where it was. A rollout stops
when at least ``stop_stay`` of its movable decisions chose to stay, or after
``max_steps``. Then every point visited is scored once (the cost model's prediction, or
any scorer), standardized over the round, and a step's reward is the score it gained
(an invalid move: a score below every valid point's). The policy learns from the
round's rollouts by PPO, and the visited points and their scores are returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from tuner.search.params import RLConfig
from tuner.search.rl_policy import ActorCritic, Rollouts, gae, ppo_update
from tuner.search.rl_space import DecisionSpace, Point

#: Builds a point: the point as built (TVM may move a decision), or ``None`` if invalid.
Resolve = Callable[[Point], "Point | None"]
#: Scores points: a ``len(points)`` array, higher is better.
Score = Callable[[list[Point]], np.ndarray]


@dataclass
class _Trajectory:
    """One rollout: its states, moves and the points each step went from and to."""

    states: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    moves: list[tuple[Point, Point | None]] = field(default_factory=list)
    last_value: float = 0.0

    def end(self, start: Point) -> Point:
        """Where the rollout ended (an invalid last move left it where it was)."""
        if not self.moves:
            return start
        before, after = self.moves[-1]
        return before if after is None else after


@dataclass
class Exploration:
    """What one round of rollouts found.

    Attributes:
        scores: Each valid point visited (start points included) with its score.
        start_scores: The start points' scores, in order.
        end_scores: The score of the point each rollout ended at, in order.
        steps: Steps taken, over all rollouts.
    """

    scores: dict[Point, float]
    start_scores: list[float]
    end_scores: list[float]
    steps: int


class Explorer:
    """The actor-critic of one task, and its rounds of rollouts.

    Args:
        space: The task's decision space.
        params: The ``search_params.rl`` section.
        seed: Seed of the policy's weights and of its move sampling.
        device: Where the policy runs.
    """

    def __init__(self, space: DecisionSpace, params: RLConfig, seed: int = 0,
                 device: torch.device | None = None) -> None:
        self.space = space
        self.params = params
        self.device = device or torch.device("cpu")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.policy = ActorCritic(space.dim, max(1, space.width), params.hidden,
                                      params.stay_prior)
        self.policy.to(self.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=params.lr)
        self.generator = torch.Generator(device=self.device).manual_seed(int(seed))

    def explore(self, starts: list[Point], resolve: Resolve, score: Score) -> Exploration:
        """Roll out from ``starts``, score what was visited, improve the policy.

        Args:
            starts: Valid start points, one rollout each.
            resolve: Builds a point (see :data:`Resolve`).
            score: Scores points (see :data:`Score`).

        Returns:
            An :class:`Exploration`.
        """
        trajectories = self._rollouts(list(starts), resolve)
        visited = list(dict.fromkeys(
            [p for t in trajectories for move in t.moves for p in move if p is not None]
            + list(starts)))
        raw = np.asarray(score(visited), dtype=float) if visited else np.zeros(0)
        scores = dict(zip(visited, raw.tolist(), strict=False))
        z = dict(zip(visited, _standardize(raw).tolist(), strict=False))
        floor = min(z.values(), default=0.0) - 1.0  # an invalid point's standardized score
        self._learn(trajectories, z, floor)
        return Exploration(scores=scores, start_scores=[scores[s] for s in starts],
                           end_scores=[scores[t.end(s)]
                                       for t, s in zip(trajectories, starts, strict=False)],
                           steps=sum(len(t.moves) for t in trajectories))

    def _rollouts(self, points: list[Point], resolve: Resolve) -> list[_Trajectory]:
        trajectories = [_Trajectory() for _ in points]
        active = list(range(len(points)))
        for step in range(self.params.max_steps):
            if not active:
                break
            here = [points[i] for i in active]
            states, masks = self.space.state(here), self.space.moves(here)
            actions, log_probs, values = self.policy.act(
                torch.as_tensor(states, device=self.device),
                torch.as_tensor(masks, device=self.device), self.generator)
            actions = actions.cpu().numpy()
            movable = masks[:, :, 0] | masks[:, :, 2]
            still = []
            for row, i in enumerate(active):
                target = self.space.move([points[i]], actions[row: row + 1])[0]
                new = points[i] if target == points[i] else resolve(target)
                t = trajectories[i]
                t.states.append(states[row])
                t.masks.append(masks[row])
                t.actions.append(actions[row])
                t.log_probs.append(float(log_probs[row]))
                t.values.append(float(values[row]))
                t.moves.append((points[i], new))
                if new is not None:
                    points[i] = new
                n_movable = int(movable[row].sum())
                stays = int((movable[row] & (actions[row] == 1)).sum())
                if n_movable and stays < self.params.stop_stay * n_movable:
                    still.append(i)
            if step == self.params.max_steps - 1 and still:  # cut by the cap: bootstrap
                x = torch.as_tensor(self.space.state([points[i] for i in still]),
                                    device=self.device)
                m = torch.as_tensor(self.space.moves([points[i] for i in still]),
                                    device=self.device)
                with torch.no_grad():
                    _, last = self.policy(x, m)
                for i, v in zip(still, last.cpu().tolist(), strict=False):
                    trajectories[i].last_value = v
            active = still
        return trajectories

    def _learn(self, trajectories: list[_Trajectory], z: dict[Point, float],
               floor: float) -> None:
        rows: dict[str, list] = {k: [] for k in ("s", "m", "a", "lp", "adv", "ret")}
        for t in trajectories:
            if not t.moves:
                continue
            rewards = [(floor if b is None else z[b]) - z[a] for a, b in t.moves]
            adv, ret = gae(rewards, t.values, t.last_value, self.params.gamma,
                           self.params.gae_lambda)
            rows["s"] += t.states
            rows["m"] += t.masks
            rows["a"] += t.actions
            rows["lp"] += t.log_probs
            rows["adv"] += adv
            rows["ret"] += ret
        if not rows["s"]:
            return
        dev = self.device
        data = Rollouts(
            states=torch.as_tensor(np.stack(rows["s"]), device=dev),
            masks=torch.as_tensor(np.stack(rows["m"]), device=dev),
            actions=torch.as_tensor(np.stack(rows["a"]), device=dev, dtype=torch.long),
            log_probs=torch.as_tensor(rows["lp"], device=dev, dtype=torch.float32),
            advantages=torch.as_tensor(rows["adv"], device=dev, dtype=torch.float32),
            returns=torch.as_tensor(rows["ret"], device=dev, dtype=torch.float32))
        ppo_update(self.policy, self.optimizer, data, self.params)


def _standardize(x: np.ndarray) -> np.ndarray:
    """``(x - mean) / std`` (all zeros when ``x`` does not vary)."""
    if len(x) == 0:
        return x
    std = x.std()
    return (x - x.mean()) / std if std > 1e-12 else np.zeros_like(x)
