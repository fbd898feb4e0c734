"""Rejection sampling: the one draw-until-accepted loop of the workload generators
(:func:`metatune.workloads.sample_workload`,
:func:`metatune.workloads_transformer.sample_sequence_workload`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Draws before a generator gives up (a kind whose ranges its bounds almost never admit).
TRIES = 10000


def rejection_sample(draw: Callable[[], T], accept: Callable[[T], bool], failure: str,
                     tries: int = TRIES) -> T:
    """The first of at most ``tries`` draws that ``accept`` takes.

    Each draw is one call of ``draw`` (which advances the caller's random generator), so
    the same generator state gives the same result, after the same number of draws.

    Args:
        draw: Draws one candidate.
        accept: Whether a candidate is within the bounds.
        failure: The error's message when no draw is accepted.
        tries: How many draws at most.

    Raises:
        RuntimeError: None of the ``tries`` draws was accepted (``failure``).
    """
    for _ in range(tries):
        value = draw()
        if accept(value):
            return value
    raise RuntimeError(failure)
