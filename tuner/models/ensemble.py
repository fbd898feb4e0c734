"""Several MetaTune checkpoints as one MetaSchedule ``PyCostModel``: the mean of their
scores.

Checkpoints trained the same way from different seeds rank a task's candidates
differently; the mean of two seeds ranked better than either alone on the EPYC's held-out
convolutions and matched the better one on a validation fold, with a lower MSE(D) before
any measurement (``docs/lab/cost-model/ensemble-val-znver4.md``, ``checkpoints/README.md``).

Each member adapts to the task's measurements on its own, exactly as it would alone
(:class:`MetaTuneCostModel`); the members share one graph mode and one
:class:`GraphCache`, so every candidate is encoded once and only the GCN runs once per
member.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from metatune.errors import ConfigError
from metatune.safe_load import load_tensors
from tuner.models.cost_model import GraphCache, MetaTuneCostModel, candidate_keys, loading
from tuner.models.trained import TrainedModel

# graphs kept for the members to share: the search scores a pool of a few hundred
# candidates at a time, and the members score the same pool one after the other
SHARED_GRAPHS = 2048


@derived_object
class EnsembleCostModel(PyCostModel):
    """The mean of the scores of several MetaTune cost models of one graph mode.

    Args:
        models: The members' networks and adaptations (:func:`load_model`), at least two.
        graph: Their graph mode.
        device: Where the GCNs embed and fine-tune.
        shared_graphs: Graphs kept for the members to share.

    Raises:
        ConfigError: Fewer than two members, or a member trained on another graph mode.
    """

    def __init__(self, *, models: list[TrainedModel], graph: str,
                 device: torch.device | None = None,
                 shared_graphs: int = SHARED_GRAPHS) -> None:
        super().__init__()
        if len(models) < 2:
            raise ConfigError(f"an ensemble needs at least two checkpoints, got {len(models)}: "
                              "list more in metatune.ensemble, or leave it empty")
        other = [m.graph for m in models if m.graph != graph]
        if other:
            raise ConfigError(f"metatune.ensemble mixes graph modes ({graph} and {other[0]}): "
                              f"give checkpoints trained with python train.py graph={graph}")
        cache = GraphCache(graph, shared_graphs)
        self.members = [MetaTuneCostModel(model=m, graph=graph, device=device,
                                          graph_cache=cache) for m in models]

    def update(self, context, candidates, results) -> None:
        """Fine-tune every member on the task's measurements so far (the candidates are
        hashed once for all members' caches)."""
        keys = candidate_keys(candidates)
        for m in self.members:
            m.fine_tune(context, candidates, results, keys)

    def predict(self, context, candidates) -> np.ndarray:
        """The members' mean score, a float64 array in the candidates' order (the
        candidates are hashed once for all members' caches)."""
        return self.member_scores(context, candidates).mean(0)

    def member_scores(self, context, candidates, keys: list[int] | None = None) -> np.ndarray:
        """Each member's scores: ``members x candidates``, float64 (``keys``: the
        candidates' structural hashes when the caller has them)."""
        keys = candidate_keys(candidates) if keys is None else keys
        return np.stack([m.scores(context, candidates, keys) for m in self.members])

    def save(self, path: str) -> None:
        """Save every member's network and fine-tuning state."""
        torch.save({"members": [m.state() for m in self.members]}, path)

    def load(self, path: str) -> None:
        """Load what :meth:`save` wrote.

        Raises:
            CheckpointError: The file is missing, not a saved ensemble, or of another
                number of members or other networks.
        """
        with loading(path):
            blob = load_tensors(path, self.members[0].device, graphs=True)  # nothing in it runs
            states = blob["members"]
            if len(states) != len(self.members):
                raise ValueError(f"it has {len(states)} members, this ensemble "
                                 f"{len(self.members)}")
            before = copy.deepcopy([m.state() for m in self.members])  # not views
            try:
                for m, state in zip(self.members, states, strict=False):
                    m.load_state(state)
            except Exception:  # all members or none
                for m, state in zip(self.members, before, strict=False):
                    m.load_state(state)
                raise
