"""PyTorch's CPU threads while the tuner's learned parts run.

The tuner's tensors are small: a GCN over a few hundred candidates' graphs, a head of 64
units adapted on at most 256 embeddings, a GP over a few hundred points. Split over
several OpenMP threads, each of their thousands of tiny operations waits at a barrier for
every thread, and a thread that the OS has given to another job (TVM's builder and runner,
the evaluation, another tuning run) stalls all of them. Measured on the 2-core development
machine under load (``docs/lab/search/round-overhead.md``): 50 fine-tuning steps took 0.9 to
1.3 s on 2 threads and 0.13 to 0.16 s on one; a GP selection 5x longer on 2. On one thread
the GCN's embeddings and the fine-tuned weights came out the same to the last bit.

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
