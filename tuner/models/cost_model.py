"""The MetaTune cost model as a MetaSchedule ``PyCostModel``.

``predict`` encodes each candidate's scheduled function as a loop-nest graph, embeds it
with the (frozen) meta-trained GCN and scores it with the regression head; ``update``
fine-tunes the head online on the task's measurements with the same adaptation function
MAML meta-trained it with (:func:`metatune.maml.adapt`), starting from the meta-learned
initial weights each time (the MAML recipe), so a handful of measurements adapt it.
State is kept per task (keyed by the workload's structural hash).
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from metatune.errors import MetaTuneError
from metatune.graph import NODE_FEATURES, encode
from metatune.maml import adapt, head_params, predict
from metatune.model import MetaTuneNet
from tuner.models.params import MetaTuneModelConfig
from metatune.records import measured_seconds

logger = logging.getLogger(__name__)


class CheckpointError(MetaTuneError):
    """The cost-model checkpoint is missing or unreadable."""


def load_net(checkpoint: str | None, *, from_scratch: bool = False, hidden: int = 64):
    """The GCN cost network from a checkpoint, or a fresh one.

    Args:
        checkpoint: A ``train.py`` checkpoint (``MetaModule``).
        from_scratch: Start from random weights instead (no checkpoint needed).
        hidden: Width of a fresh network.

    Raises:
        CheckpointError: The checkpoint is missing or cannot be loaded.
    """
    # Lightning only to read the checkpoint: kept lazy, out of the tuner's start-up.
    from lightning_modules.meta import MetaModule

    if from_scratch:
        return MetaTuneNet(NODE_FEATURES, hidden, 2, hidden)
    if not checkpoint or not os.path.isfile(checkpoint):
        raise CheckpointError(
            f"cost-model checkpoint {checkpoint!r} not found: train one with python train.py, "
            "pass its path (metatune.checkpoint=PATH), or start the model from scratch "
            "(metatune.from_scratch=true)")
    try:
        return MetaModule.load_from_checkpoint(checkpoint, map_location="cpu").net
    except Exception as err:  # torch/Lightning raise many types on a bad file
        raise CheckpointError(
            f"cannot load cost-model checkpoint {checkpoint!r} ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:160]}); retrain it with python train.py or start "
            "the model from scratch (metatune.from_scratch=true)") from err


@dataclass
class TaskState:
    """Online fine-tuning state of one task: its measured embeddings and run times."""

    embeddings: list[torch.Tensor] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    fast: dict | None = None


@derived_object
class MetaTuneCostModel(PyCostModel):
    """MetaSchedule cost model backed by the meta-trained GCN.

    Args:
        net: A :class:`metatune.model.MetaTuneNet` (see :func:`load_net`).
        graph: Graph mode the network was trained with (``super`` or ``plain``).
        adapt_steps: Inner steps of each online fine-tuning.
        adapt_lr: Inner step size.
        max_support: Most recent measurements kept per task for fine-tuning.
        cache_size: Candidate embeddings remembered (by the scheduled module's structural
            hash): the search scores many candidates several times per round.
    """

    def __init__(self, *, net, graph: str = MetaTuneModelConfig.graph,
                 adapt_steps: int = MetaTuneModelConfig.adapt_steps,
                 adapt_lr: float = MetaTuneModelConfig.adapt_lr, max_support: int = 256,
                 cache_size: int = 8192) -> None:
        super().__init__()
        self.net = net.eval()
        for p in self.net.parameters():
            p.requires_grad_(False)
        self.graph = graph
        self.adapt_steps = int(adapt_steps)
        self.adapt_lr = float(adapt_lr)
        self.max_support = int(max_support)
        self.tasks: dict[int, TaskState] = {}
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[int, torch.Tensor] = OrderedDict()

    @staticmethod
    def _key(context) -> int:
        from tvm_ffi import structural_hash

        return structural_hash(context.mod)

    def embed(self, candidates) -> torch.Tensor:
        """Embeddings of the candidates: a ``n x d`` tensor (cached per scheduled module)."""
        from torch_geometric.data import Batch
        from tvm_ffi import structural_hash

        keys = [structural_hash(c.sch.mod) for c in candidates]
        todo = [i for i, k in enumerate(keys) if k not in self._cache]
        if todo:
            batch = Batch.from_data_list(
                [encode(candidates[i].sch.mod["main"], self.graph) for i in todo])
            with torch.no_grad():
                fresh = self.net.embed(batch.x, batch.edge_index, batch.batch)
            for i, emb in zip(todo, fresh):
                self._cache[keys[i]] = emb
        for k in keys:
            self._cache.move_to_end(k)
        out = torch.stack([self._cache[k] for k in keys])
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out

    def update(self, context, candidates, results) -> None:
        """Fine-tune the head on the task's measurements so far (failed ones skipped)."""

        state = self.tasks.setdefault(self._key(context), TaskState())
        secs = [measured_seconds(r.run_secs, r.error_msg) for r in results]
        keep = [i for i, s in enumerate(secs) if s is not None]
        if not keep:
            return
        emb = self.embed([candidates[i] for i in keep])
        state.embeddings += list(emb)
        state.seconds += [secs[i] for i in keep]
        state.embeddings = state.embeddings[-self.max_support:]
        state.seconds = state.seconds[-self.max_support:]
        best = min(state.seconds)
        targets = torch.tensor([best / s for s in state.seconds], dtype=torch.float32)
        params = {k: v.detach().requires_grad_(True)
                  for k, v in head_params(self.net.head).items()}
        with torch.enable_grad():
            fast = adapt(self.net.head, params, torch.stack(state.embeddings), targets,
                         steps=self.adapt_steps, lr=self.adapt_lr, first_order=True)
        state.fast = {k: v.detach() for k, v in fast.items()}

    def predict(self, context, candidates) -> np.ndarray:
        """Scores (higher is better), a float64 array in the candidates' order."""
        state = self.tasks.get(self._key(context))
        params = state.fast if state and state.fast else head_params(self.net.head)
        with torch.no_grad():
            scores = predict(self.net.head, params, self.embed(candidates))
        return scores.double().numpy()

    def save(self, path: str) -> None:
        """Save the network and every task's fine-tuning state."""
        torch.save({"net": self.net.state_dict(), "graph": self.graph,
                    "tasks": {k: (v.embeddings, v.seconds, v.fast) for k, v in self.tasks.items()}},
                   path)

    def load(self, path: str) -> None:
        """Load what :meth:`save` wrote.

        Raises:
            CheckpointError: The file is missing or not a saved MetaTune cost model.
        """
        try:
            blob = torch.load(path, map_location="cpu", weights_only=False)
            self.net.load_state_dict(blob["net"])
        except Exception as err:
            raise CheckpointError(f"cannot load the MetaTune cost model from {path!r}: "
                                  f"{str(err).splitlines()[0][:160]}") from err
        self.graph = blob["graph"]
        self.tasks = {k: TaskState(list(e), list(s), f) for k, (e, s, f) in blob["tasks"].items()}
