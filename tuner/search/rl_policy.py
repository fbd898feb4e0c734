"""The RL search's actor-critic and its PPO update (plain PyTorch, independent of TVM).

The policy sees a point of the decision space (:class:`tuner.search.rl_space.DecisionSpace`
``state``) and chooses, for every decision at once, one of three moves: down, stay, up
(one categorical head per decision; moves a decision cannot make are masked). The critic
estimates the return of the rollout from that point. After each round's rollouts the
policy is improved by PPO's clipped objective on generalized-advantage estimates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from tuner.search.params import RLConfig

#: The moves of a decision: 0 down, 1 stay, 2 up.
MOVES = 3
_VALUE_WEIGHT = 0.5
_MAX_GRAD_NORM = 0.5


class ActorCritic(nn.Module):
    """A two-layer trunk shared by one 3-way head per decision and a value head.

    Args:
        dim: Length of a state vector.
        width: Decisions (action heads).
        hidden: Width of the hidden layers.
        stay_prior: The untrained policy's probability of "stay" for a decision that can
            move both ways (1/3: uniform).
    """

    def __init__(self, dim: int, width: int, hidden: int = 64,
                 stay_prior: float = 1.0 / 3.0) -> None:
        super().__init__()
        self.width = int(width)
        self.trunk = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.Tanh())
        self.actor = nn.Linear(hidden, self.width * MOVES)
        self.critic = nn.Linear(hidden, 1)
        with torch.no_grad():
            self.actor.weight.mul_(0.01)  # start close to the prior over the allowed moves
            # stay's logit b against 0 for down and up: e^b / (e^b + 2) = stay_prior
            bias = torch.zeros(self.width, MOVES)
            bias[:, 1] = math.log(2.0 * stay_prior / (1.0 - stay_prior))
            self.actor.bias.copy_(bias.view(-1))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Move log-probabilities and state values.

        Args:
            x: An ``n x dim`` tensor of states.
            mask: An ``n x width x 3`` boolean tensor of the allowed moves.

        Returns:
            ``(log_probs, values)``: an ``n x width x 3`` tensor (``-inf`` where not
            allowed) and an ``n`` tensor.
        """
        h = self.trunk(x)
        logits = self.actor(h).view(-1, self.width, MOVES)
        logits = logits.masked_fill(~mask, float("-inf"))
        return torch.log_softmax(logits, dim=-1), self.critic(h).squeeze(-1)

    @torch.no_grad()
    def act(self, x: torch.Tensor, mask: torch.Tensor,
            generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
        """Sample a move per decision.

        Args:
            x: An ``n x dim`` tensor of states.
            mask: An ``n x width x 3`` boolean tensor of the allowed moves.
            generator: The sampler's random generator.

        Returns:
            ``(actions, log_prob, value)``: an ``n x width`` tensor of moves, the ``n``
            joint log-probabilities and the ``n`` state values.
        """
        log_probs, value = self(x, mask)
        probs = log_probs.exp().view(-1, MOVES)
        actions = torch.multinomial(probs, 1, generator=generator).view(-1, self.width)
        return actions, _joint(log_probs, actions), value

    def evaluate(self, x: torch.Tensor, mask: torch.Tensor,
                 actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Log-probabilities of given moves, the policy's entropy and the state values.

        Args:
            x: An ``n x dim`` tensor of states.
            mask: An ``n x width x 3`` boolean tensor of the allowed moves.
            actions: An ``n x width`` tensor of moves.

        Returns:
            ``(log_prob, entropy, value)``, each an ``n`` tensor (entropy summed over the
            decisions).
        """
        log_probs, value = self(x, mask)
        p = log_probs.exp()
        entropy = -(p * log_probs.masked_fill(~mask, 0.0)).sum((-1, -2))
        return _joint(log_probs, actions), entropy, value


def _joint(log_probs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The ``n`` joint log-probabilities of ``n x width`` moves under ``n x width x 3``
    per-decision log-probabilities."""
    return log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1).sum(-1)


@dataclass
class Rollouts:
    """One round's transitions, flattened over rollouts and steps (``m`` of them).

    Attributes:
        states: An ``m x dim`` tensor.
        masks: An ``m x width x 3`` boolean tensor of the allowed moves.
        actions: An ``m x width`` tensor of the moves taken.
        log_probs: The ``m`` joint log-probabilities the moves were sampled with.
        advantages: The ``m`` GAE advantages.
        returns: The ``m`` value targets (advantage + value).
    """

    states: torch.Tensor
    masks: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


def gae(rewards: list[float], values: list[float], last_value: float, gamma: float,
        lam: float) -> tuple[list[float], list[float]]:
    """Generalized advantage estimates of one rollout.

    Args:
        rewards: The rollout's rewards, one per step.
        values: The critic's value of the state each step started from.
        last_value: The value of the state after the last step (0 when the rollout ended
            by itself, the critic's value when the step cap cut it).
        gamma: Discount.
        lam: GAE's lambda.

    Returns:
        ``(advantages, returns)``, one per step.
    """
    adv, running = [0.0] * len(rewards), 0.0
    nxt = last_value
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * nxt - values[t]
        running = delta + gamma * lam * running
        adv[t] = running
        nxt = values[t]
    return adv, [a + v for a, v in zip(adv, values, strict=False)]


def ppo_update(policy: ActorCritic, optimizer: torch.optim.Optimizer, data: Rollouts,
               params: RLConfig) -> None:
    """PPO's clipped update, ``params.epochs`` full-batch epochs over one round's rollouts.

    Args:
        policy: The actor-critic.
        optimizer: Its optimizer.
        data: The round's transitions (on the policy's device).
        params: ``clip``, ``entropy`` and ``epochs`` are read.
    """
    adv = data.advantages
    if len(adv) > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    for _ in range(params.epochs):
        log_prob, entropy, value = policy.evaluate(data.states, data.masks, data.actions)
        ratio = (log_prob - data.log_probs).exp()
        surrogate = torch.min(ratio * adv, ratio.clamp(1 - params.clip, 1 + params.clip) * adv)
        loss = (-surrogate.mean() + _VALUE_WEIGHT * (value - data.returns).pow(2).mean()
                - params.entropy * entropy.mean())
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), _MAX_GRAD_NORM)
        optimizer.step()
