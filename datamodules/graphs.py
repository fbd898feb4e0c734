"""Data for training: supervised graph batches and episodic N-way K-shot tasks.

Workloads are split, never samples: a workload is in the training or the validation
split, not both (the held-out network workloads are a third, separate split on disk).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytorch_lightning as pl
import torch
from torch.utils.data import IterableDataset

from metatune.dataset import (
    EPISODE_TARGETS,
    WorkloadSamples,
    as_split_dirs,
    left_out_workloads,
    load_split,
)


def split_workloads(workloads: list[WorkloadSamples], val_fraction: float,
                    seed: int) -> tuple[list[WorkloadSamples], list[WorkloadSamples]]:
    """Disjoint (train, val) workload lists; each kind keeps at least one train workload,
    and a workload's NHWC twin (``<name>_nhwc``) is on its side.

    Args:
        workloads: All training-split workloads.
        val_fraction: Fraction of each kind's workloads put in validation.
        seed: Shuffle seed.
    """
    rng = random.Random(seed)
    train, val = [], []
    kinds = sorted({w.kind for w in workloads})
    for kind in kinds:
        # a workload and its NHWC twin (the same draw, ``_nhwc``) go to the same side
        twins: dict[str, list[WorkloadSamples]] = {}
        for w in workloads:
            if w.kind == kind:
                twins.setdefault(w.name.removesuffix("_nhwc"), []).append(w)
        group = list(twins.values())
        rng.shuffle(group)
        n_val = min(len(group) - 1, round(len(group) * val_fraction))
        val += [w for twin in group[:n_val] for w in twin]
        train += [w for twin in group[n_val:] for w in twin]
    return train, val


class EpisodeDataset(IterableDataset):
    """Endless N-way K-shot regression tasks: N workloads, K support + Q query each.

    Each item is ``(support, query)``: two PyG ``Batch`` objects whose graphs carry
    ``y`` targets. Workloads with fewer than ``shots + queries`` samples are not drawn.

    Args:
        workloads: The workloads to draw from.
        ways: Workloads per task (N).
        shots: Support samples per workload (K).
        queries: Query samples per workload.
        seed: Random seed.
        targets: ``workload``: each sample's throughput relative to its workload's best
            over every measured sample (the dataset's ``y``); ``support``: relative to the
            best of the workload's support samples, as the tuner sees a task (relative to
            the best measured so far; query targets may then exceed 1).
    """

    def __init__(self, workloads: list[WorkloadSamples], ways: int, shots: int, queries: int,
                 seed: int = 0, targets: str = "workload") -> None:
        super().__init__()
        self.pool = [w for w in workloads if len(w.graphs) >= shots + queries]
        if not self.pool:
            raise ValueError(f"no workload has {shots + queries} samples for {shots}-shot tasks "
                             f"with {queries} queries: lower meta.shots / meta.queries")
        self.ways = min(ways, len(self.pool))
        self.shots, self.queries, self.seed = shots, queries, seed
        if targets not in EPISODE_TARGETS:
            raise ValueError(f"targets={targets!r}: choose one of {', '.join(EPISODE_TARGETS)}")
        self.targets = targets

    def __iter__(self) -> Iterator[tuple]:
        from torch_geometric.data import Batch

        rng = random.Random(self.seed + 1_000_003 * _rank())  # distinct tasks on every rank
        while True:
            support, query = [], []
            for w in rng.sample(self.pool, self.ways):
                picked = rng.sample(w.graphs, self.shots + self.queries)
                support += picked[: self.shots]
                query += picked[self.shots:]
            s, q = Batch.from_data_list(support), Batch.from_data_list(query)
            if self.targets == "support":
                s.y, q.y = support_relative(s.y, q.y, self.ways)
            yield s, q


def support_relative(support_y: torch.Tensor, query_y: torch.Tensor,
                     ways: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rescale each workload's targets by its support samples' best.

    Args:
        support_y: ``ways * shots`` targets, workload by workload.
        query_y: ``ways * queries`` targets, in the same workload order.
        ways: Number of workloads.

    Returns:
        Both, divided by their workload's best support target (same shapes).
    """
    best = support_y.reshape(ways, -1).max(dim=1, keepdim=True).values
    return ((support_y.reshape(ways, -1) / best).reshape(support_y.shape),
            (query_y.reshape(ways, -1) / best).reshape(query_y.shape))


class WorkloadBatchSampler(torch.utils.data.Sampler):
    """Batches of ``per_workload`` graphs from each of ``batch_size // per_workload``
    workloads, so that a ranking loss has pairs of one workload to compare; reshuffled
    every epoch, deterministically from ``seed``.

    Args:
        sizes: Graphs per workload, in the order of the flat graph list (each workload's
            graphs contiguous).
        per_workload: Graphs of one workload in a batch (a workload's last chunk may hold
            fewer).
        batch_size: Graphs per batch (at least ``per_workload``).
        seed: Shuffle seed.
        shuffle: ``False``: the same batches every epoch, in order (validation).
    """

    def __init__(self, sizes: list[int], per_workload: int, batch_size: int, seed: int = 0,
                 shuffle: bool = True) -> None:
        if per_workload < 1 or batch_size < per_workload:
            raise ValueError(f"per_workload={per_workload}, batch_size={batch_size}: need "
                             "1 <= per_workload <= batch_size")
        self.sizes, self.per_workload, self.shuffle = list(sizes), per_workload, shuffle
        self.chunks_per_batch = batch_size // per_workload
        self.seed, self.epoch = seed, 0

    def _batches(self) -> list[list[int]]:
        rng = random.Random(self.seed * 100003 + self.epoch)
        chunks, start = [], 0
        for size in self.sizes:
            idx = list(range(start, start + size))
            if self.shuffle:
                rng.shuffle(idx)
            chunks += [idx[i:i + self.per_workload] for i in range(0, size, self.per_workload)]
            start += size
        if self.shuffle:
            rng.shuffle(chunks)
        n = self.chunks_per_batch
        return [[i for c in chunks[b:b + n] for i in c] for b in range(0, len(chunks), n)]

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._batches()
        if self.shuffle:
            self.epoch += 1
        return iter(batches)

    def __len__(self) -> int:
        chunks = sum(-(-s // self.per_workload) for s in self.sizes)
        return -(-chunks // self.chunks_per_batch)


def _rank() -> int:
    """This process's global rank in a distributed run (0 when there is none)."""
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _without_networks(workloads: list[WorkloadSamples], dirs: list[str],
                      networks: list[str]) -> list[WorkloadSamples]:
    """``workloads`` less every one that a network of ``networks`` uses (by the splits'
    ``meta.json``; a workload several networks share goes if any of them is named).

    Raises:
        ConfigError: A named network uses no workload of these splits (the message lists
            the networks they have).
    """
    drop = left_out_workloads(dirs, networks, "data.leave_out_networks")
    return [w for w in workloads if w.name not in drop]


def _collate_tasks(tasks: list) -> list:
    return tasks


class GraphDataModule(pl.LightningDataModule):
    """Supervised batches (pre-training) and episodic tasks (meta-training).

    Args:
        split_dirs: ``data/<target>/train`` (and ``train-nhwc``): their workloads together.
        mode: Graph mode (``super`` or ``plain``).
        cache_dir: Encoded-graph cache directory.
        val_fraction: Fraction of workloads (per kind) held for validation.
        batch_size: Graphs per supervised batch.
        ways, shots, queries: Episodic task shape.
        targets: Episodic target normalization (:class:`EpisodeDataset`).
        per_workload: Supervised batches of this many graphs per workload
            (:class:`WorkloadBatchSampler`; for a ranking loss); 0: drawn over all graphs.
        tasks_per_batch: Tasks per meta-batch.
        val_tasks: Validation tasks per epoch.
        seed: Seed of the workload split and the samplers.
        leave_out_networks: Drop every workload one of these networks uses (its split's
            ``meta.json`` ``networks``), e.g. to validate on their convs afterwards.
    """

    def __init__(self, split_dirs: str | list[str], mode: str, cache_dir: str | None = None,
                 val_fraction: float = 0.15, batch_size: int = 64, ways: int = 5,
                 shots: int = 8, queries: int = 16, tasks_per_batch: int = 4,
                 val_tasks: int = 16, seed: int = 0, targets: str = "workload",
                 per_workload: int = 0, leave_out_networks: list[str] | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.train_workloads: list[WorkloadSamples] = []
        self.val_workloads: list[WorkloadSamples] = []

    def setup(self, stage: str | None = None) -> None:
        if self.train_workloads:
            return
        hp = self.hparams
        dirs = as_split_dirs(hp.split_dirs)
        workloads = [w for d in dirs for w in load_split(d, hp.mode, hp.cache_dir)]
        if hp.leave_out_networks:
            workloads = _without_networks(workloads, dirs, list(hp.leave_out_networks))
        if len(workloads) < 2:
            raise ValueError(f"{', '.join(dirs)}: {len(workloads)} workload(s) with samples; "
                             "training needs at least 2 (collect more: python collect.py run)")
        self.train_workloads, self.val_workloads = split_workloads(
            workloads, hp.val_fraction, hp.seed)
        for i, w in enumerate(workloads):  # which graphs a ranking loss may compare
            for g in w.graphs:
                g.wid = torch.tensor([i])

    def feature_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and std of node features over the training graphs (``in_features`` each)."""
        x = torch.cat([g.x for w in self.train_workloads for g in w.graphs])
        return x.mean(0), x.std(0)

    def _graphs(self, workloads: list[WorkloadSamples]) -> list:
        return [g for w in workloads for g in w.graphs]

    def _loader(self, workloads: list[WorkloadSamples], train: bool):
        from torch_geometric.loader import DataLoader

        hp = self.hparams
        if not hp.per_workload:
            return DataLoader(self._graphs(workloads), batch_size=hp.batch_size, shuffle=train)
        sampler = WorkloadBatchSampler([len(w.graphs) for w in workloads], hp.per_workload,
                                       hp.batch_size, hp.seed, shuffle=train)
        return DataLoader(self._graphs(workloads), batch_sampler=sampler)

    def train_dataloader(self):
        return self._loader(self.train_workloads, train=True)

    def val_dataloader(self):
        return self._loader(self.val_workloads or self.train_workloads, train=False)

    def episodes(self, train: bool = True, seed: int | None = None):
        """A loader of lists of ``tasks_per_batch`` episodic tasks (train or val workloads)."""
        from torch.utils.data import DataLoader

        hp = self.hparams
        source = self.train_workloads if train else (self.val_workloads or self.train_workloads)
        data = EpisodeDataset(source, hp.ways, hp.shots, hp.queries,
                              hp.seed if seed is None else seed, targets=hp.targets)
        return DataLoader(data, batch_size=hp.tasks_per_batch if train else 1,
                          collate_fn=_collate_tasks)
