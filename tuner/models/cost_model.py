"""The MetaTune cost model as a MetaSchedule ``PyCostModel``.

``predict`` encodes each candidate's scheduled function as a loop-nest graph, embeds it
with the meta-trained GCN and scores it with the regression head; ``update`` fine-tunes
online on the task's measurements with the adaptation the checkpoint was meta-trained for
(:class:`metatune.maml.InnerLoop`: the same code, scope, step sizes and loss; the tuner
takes more steps at a larger step size, ``metatune.adapt_steps`` / ``adapt_lr``, chosen on
the checkpoint's validation convs), starting from the meta-learned initial weights each
time (the MAML recipe), so a handful of measurements adapt it. State is kept per task
(keyed by the workload's structural hash).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from metatune.errors import CheckpointError, register_ffi_errors
from metatune.graph import encode
from metatune.records import measured_seconds
from metatune.safe_load import load_error, load_tensors
from metatune.threads import torch_threads
from tuner.models.params import MetaTuneModelConfig
from tuner.models.trained import TrainedModel

register_ffi_errors()  # a CheckpointError from load() crosses TVM's FFI as itself

logger = logging.getLogger(__name__)


@dataclass
class TaskState:
    """Online fine-tuning state of one task: its measured candidates and run times.

    Attributes:
        inputs: Per measured candidate, what the inner loop adapts on: its embedding (a
            ``d`` tensor) when only the head adapts, else its graph (PyG ``Data``).
        seconds: Their measured run times.
        fast: The adapted fast weights (``None`` before the first update).
    """

    inputs: list = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    fast: dict | None = None


@derived_object
class MetaTuneCostModel(PyCostModel):
    """MetaSchedule cost model backed by the meta-trained GCN.

    Args:
        model: The network and its adaptation (:func:`tuner.models.trained.load_model`).
        graph: Graph mode the network was trained with (``super`` or ``plain``).
        max_support: Most recent measurements kept per task for fine-tuning.
        cache_size: Candidate graphs and embeddings remembered (by the scheduled module's
            structural hash): the search scores many candidates several times per round
            (graphs only in the model's own cache, not in a shared ``graph_cache``).
        device: Where the GCN embeds and fine-tunes (graphs are encoded on the CPU).
        graph_cache: Where the candidates' graphs are encoded and kept (shared by the
            members of an ensemble, :mod:`tuner.models.ensemble`, so that each candidate is
            encoded once); ``None``: the model's own.
    """

    def __init__(self, *, model: TrainedModel, graph: str = MetaTuneModelConfig.graph,
                 max_support: int = 256, cache_size: int = 8192,
                 device: torch.device | None = None, graph_cache: GraphCache | None = None) -> None:
        super().__init__()
        self.device = device or torch.device("cpu")
        self.net = model.net.to(self.device).eval()
        self.inner = model.inner.to(self.device)
        for p in [*self.net.parameters(), *self.inner.parameters()]:
            p.requires_grad_(False)
        self.graph = graph
        self.max_support = int(max_support)
        self.tasks: dict[int, TaskState] = {}
        self.cache_size = int(cache_size)
        self._graph_cache = graph_cache if graph_cache is not None else GraphCache(
            graph, 0 if self.inner.head_only else self.cache_size)
        self._emb: OrderedDict[int, torch.Tensor] = OrderedDict()

    @staticmethod
    def _key(context) -> int:
        from tvm_ffi import structural_hash

        return structural_hash(context.mod)

    def graphs(self, candidates, keys: list[int] | None = None) -> list:
        """The candidates' loop-nest graphs (:class:`GraphCache`: cached per scheduled
        module when the GCN adapts or the cache is shared; a lone head-only model caches
        the far smaller embeddings instead); ``keys``: their structural hashes, when
        known."""
        return self._graph_cache.graphs(candidates, keys)

    @torch_threads()  # tiny tensors: one thread (metatune.threads)
    def embed(self, candidates, keys: list[int] | None = None) -> torch.Tensor:
        """Embeddings by the meta-trained GCN: a ``n x d`` tensor (cached by the scheduled
        module's structural hash; ``keys``: those hashes, when the caller has them)."""
        from torch_geometric.data import Batch

        keys = keys if keys is not None else candidate_keys(candidates)
        todo = [i for i, k in enumerate(keys) if k not in self._emb]
        if todo:
            batch = Batch.from_data_list(self.graphs([candidates[i] for i in todo],
                                                     [keys[i] for i in todo])).to(self.device)
            with torch.no_grad():
                fresh = self.net.embed(batch.x, batch.edge_index, batch.batch)
            for i, emb in zip(todo, fresh, strict=False):
                self._emb[keys[i]] = emb
        for k in keys:
            self._emb.move_to_end(k)
        out = torch.stack([self._emb[k] for k in keys])
        _trim(self._emb, self.cache_size)
        return out

    def _inputs(self, candidates, keys: list[int] | None = None):
        """What the inner loop reads for these candidates (see :class:`TaskState`);
        ``keys``: their structural hashes, when known."""
        if self.inner.head_only:
            return list(self.embed(candidates, keys))
        return self.graphs(candidates, keys)

    def _stack(self, inputs: list):
        from torch_geometric.data import Batch

        if self.inner.head_only:
            return torch.stack(inputs)
        return Batch.from_data_list(inputs).to(self.device)

    def update(self, context, candidates, results) -> None:
        """Fine-tune on the task's measurements so far (:meth:`fine_tune`)."""
        self.fine_tune(context, candidates, results)

    @torch_threads()  # tiny tensors: one thread (metatune.threads)
    def fine_tune(self, context, candidates, results, keys: list[int] | None = None) -> None:
        """Fine-tune on the task's measurements so far (failed ones skipped), starting from
        the meta-learned weights, with the checkpoint's adaptation (its inner loop, scope
        and loss; :func:`tuner.app.factories.make_cost_model` sets the tuner's steps and step
        size, ``metatune.adapt_steps`` / ``adapt_lr``); ``keys``: the candidates'
        structural hashes (:func:`candidate_keys`) when the caller has them
        (MetaSchedule's ``update`` takes no more arguments)."""
        state = self.tasks.setdefault(self._key(context), TaskState())
        secs = [measured_seconds(r.run_secs, r.error_msg) for r in results]
        keep = [i for i, s in enumerate(secs) if s is not None]
        if not keep:
            return
        state.inputs += self._inputs([candidates[i] for i in keep],
                                     None if keys is None else [keys[i] for i in keep])
        state.seconds += [secs[i] for i in keep]
        state.inputs = state.inputs[-self.max_support:]
        state.seconds = state.seconds[-self.max_support:]
        best = min(state.seconds)
        targets = torch.tensor([best / s for s in state.seconds], dtype=torch.float32,
                               device=self.device)
        with torch.enable_grad():
            fast = self.inner.adapt(self.net, self.inner.initial(self.net, detach=True),
                                    self._stack(state.inputs), targets, first_order=True)
        state.fast = {k: v.detach() for k, v in fast.items()}

    def predict(self, context, candidates) -> np.ndarray:
        """Scores (higher is better), a float64 array in the candidates' order: the
        adapted model's predicted relative throughput."""
        return self.scores(context, candidates)

    def member_scores(self, context, candidates, keys: list[int] | None = None) -> np.ndarray:
        """:meth:`predict`'s scores as the one row of a ``1 x candidates`` array (the shape
        :meth:`tuner.models.ensemble.EnsembleCostModel.member_scores` gives)."""
        return self.scores(context, candidates, keys)[None]

    @torch_threads()  # tiny tensors: one thread (metatune.threads)
    def scores(self, context, candidates, keys: list[int] | None = None) -> np.ndarray:
        """What :meth:`predict` returns; ``keys``: the candidates' structural hashes
        (:func:`candidate_keys`) when the caller has them (MetaSchedule's ``predict`` takes
        no more arguments)."""
        state = self.tasks.get(self._key(context))
        fast = state.fast if state and state.fast else self.inner.initial(self.net)
        with torch.no_grad():
            if self.inner.head_only or not (state and state.fast):
                scores = self.inner.predict(self.net, fast, self.embed(candidates, keys))
            else:  # the adapted GCN embeds this task's candidates itself
                scores = self.inner.predict(self.net, fast,
                                            self._stack(self.graphs(candidates, keys)))
        return scores.double().cpu().numpy()

    def state(self) -> dict:
        """The network and every task's fine-tuning state (what :meth:`save` writes)."""
        return {"net": self.net.state_dict(), "inner": self.inner.state_dict(),
                "graph": self.graph,
                "tasks": {k: (v.inputs, v.seconds, v.fast) for k, v in self.tasks.items()}}

    def load_state(self, blob: dict) -> None:
        """Restore what :meth:`state` returned.

        Raises:
            KeyError, RuntimeError: Not such a state, or of another network.
            ValueError: A state of another graph mode.
        """
        if blob["graph"] != self.graph:
            raise ValueError(f"it was saved with {blob['graph']} graphs, this model encodes "
                             f"{self.graph}")
        self.net.load_state_dict(blob["net"])
        self.inner.load_state_dict(blob["inner"])
        self.tasks = {k: TaskState(list(e), list(s), f) for k, (e, s, f) in blob["tasks"].items()}

    def save(self, path: str) -> None:
        """Save the network and every task's fine-tuning state."""
        torch.save(self.state(), path)

    def load(self, path: str) -> None:
        """Load what :meth:`save` wrote.

        Raises:
            CheckpointError: The file is missing or not a saved MetaTune cost model.
        """
        with loading(path):
            self.load_state(load_tensors(path, self.device, graphs=True))  # nothing in it runs


@contextmanager
def loading(path: str) -> Iterator[None]:
    """Turn any failure to load a saved cost model from ``path`` into one line.

    Raises:
        CheckpointError: The file is missing, not a saved cost model, or of other networks.
    """
    try:
        yield
    except Exception as err:
        raise CheckpointError(f"cannot load the MetaTune cost model from {path!r}: "
                              f"{load_error(err, 160)}") from err


class GraphCache:
    """Candidates' loop-nest graphs, encoded once per scheduled module (keyed by its
    structural hash) and kept for the ``size`` most recently used.

    Args:
        graph: The graph mode (``super`` or ``plain``).
        size: How many graphs are kept (0: encode every time, keep none).
    """

    def __init__(self, graph: str, size: int) -> None:
        self.graph, self.size = graph, int(size)
        self._graphs: OrderedDict[int, object] = OrderedDict()

    def graphs(self, candidates, keys: list[int] | None = None) -> list:
        """The graphs of ``candidates`` (PyG ``Data``), in their order; ``keys``: their
        scheduled modules' structural hashes when the caller has them (else computed)."""
        if self.size <= 0:
            return [encode(c.sch.mod["main"], self.graph) for c in candidates]
        if keys is None:
            keys = candidate_keys(candidates)
        for c, k in zip(candidates, keys, strict=False):
            if k not in self._graphs:
                self._graphs[k] = encode(c.sch.mod["main"], self.graph)
            self._graphs.move_to_end(k)
        out = [self._graphs[k] for k in keys]
        _trim(self._graphs, self.size)
        return out


def candidate_keys(candidates) -> list[int]:
    """The structural hashes of the candidates' scheduled modules: what the graph and
    embedding caches are keyed by."""
    from tvm_ffi import structural_hash

    return [structural_hash(c.sch.mod) for c in candidates]


def _trim(cache: OrderedDict, size: int) -> None:
    """Drop the least recently used entries beyond ``size``."""
    while len(cache) > size:
        cache.popitem(last=False)
