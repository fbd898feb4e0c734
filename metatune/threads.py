"""PyTorch's CPU threads while the tuner's learned parts run.

The tuner's tensors are small: a GCN over a few hundred candidates' graphs, a head of 64
units adapted on at most 256 embeddings, a GP over a few hundred points. Split over
several OpenMP threads, each of their thousands of tiny operations waits at a barrier for
every thread, and a thread that the OS has given to another job (TVM's builder and runner,
another tuning run) stalls all of them while the others spin. On the 2-core development
machine, with other jobs beside it (``docs/lab/search/round-overhead.md``): a round's search
took 3.4 s instead of 10.7 s (CPU 3.2 s instead of 10.5 s) and its fine-tuning 0.08 s
instead of 3.2 s, choosing the same candidates in every round; resnet-18's tuning with 48
trials took 89-96 s instead of 197 s. On one thread the GCN's embeddings and the fine-tuned
scores come out the same to the last bit; the GP's posterior can differ in its last bits
(a different summation order), which left every chosen batch the same where compared.

:func:`torch_threads` runs a block on :data:`TUNER_THREADS` threads and restores the
previous setting after it, so PyTorch code outside (the evaluation's timings set their
own) is unaffected.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

#: PyTorch CPU threads for the tuner's cost model, its fine-tuning and the BO search's GP.
TUNER_THREADS = 1


@contextmanager
def torch_threads(n: int | None = None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)``, then restore the previous count
    (also a decorator: ``@torch_threads()``).

    Args:
        n: Threads for the block (at least 1); ``None``: :data:`TUNER_THREADS`, read when
            the block starts.

    Raises:
        ValueError: ``n`` below 1.
    """
    n = TUNER_THREADS if n is None else int(n)
    if n < 1:
        raise ValueError(f"torch_threads({n}): give at least one thread")
    before = torch.get_num_threads()
    if before == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
