"""The scored methods: each fits on a workload's support set and scores its query set
(``scores(w, support, query, seed)`` -> a ``query`` array of predicted relative
throughputs, higher is faster)."""

from __future__ import annotations

import numpy as np
import torch

from bench.accuracy.workloads import EvalWorkload, relative_targets
from metatune.metrics import standardized
from tuner.models.xgb_transfer import task_xgb


class MetaTuneMethod:
    """A trained checkpoint, adapted on the support set as the tuner adapts it online.

    Args:
        model: The network and its adaptation
            (:func:`tuner.models.cost_model.load_model`).
    """

    def __init__(self, model) -> None:
        self.net, self.inner, self.mode = model.net.eval(), model.inner, model.graph
        for p in [*self.net.parameters(), *self.inner.parameters()]:
            p.requires_grad_(False)
        self._inputs: dict[str, object] = {}
        self._last: tuple | None = None  # the last adaptation: (workload, support, query)

    def workload_inputs(self, w: EvalWorkload):
        """The inner loop's inputs for every graph of ``w`` (embeddings or graphs)."""
        if w.name not in self._inputs:
            from torch_geometric.data import Batch

            batch = Batch.from_data_list(w.graphs[self.mode])
            self._inputs[w.name] = (self.inner.inputs(self.net, batch) if self.inner.head_only
                                    else w.graphs[self.mode])
        return self._inputs[w.name]

    def _select(self, inputs, index: np.ndarray):
        from torch_geometric.data import Batch

        if self.inner.head_only:
            return inputs[torch.as_tensor(index)]
        return Batch.from_data_list([inputs[i] for i in index])

    def adapted_scores(self, w: EvalWorkload, support: np.ndarray,
                       query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Adapt on the support set, then score it and the query set (the last result is
        kept, so the methods built on this one, ``+gp``, adapt once).

        Returns:
            ``(support scores, query scores)``: a ``k`` and a ``query`` array.
        """
        key = (w.name, support.tobytes(), query.tobytes())
        if self._last is not None and self._last[0] == key:  # methods built on this one
            return self._last[1]
        inputs = self.workload_inputs(w)
        fast = self.inner.initial(self.net, detach=True)
        if len(support):
            y = torch.tensor(relative_targets(w.seconds, support)[support], dtype=torch.float32)
            with torch.enable_grad():
                fast = self.inner.adapt(self.net, fast, self._select(inputs, support), y,
                                        first_order=True)
        with torch.no_grad():
            out = tuple(self.inner.predict(self.net, fast, self._select(inputs, idx))
                        .double().numpy() for idx in (support, query))
        self._last = (key, out)
        return out

    def scores(self, w: EvalWorkload, support: np.ndarray, query: np.ndarray,
               seed: int) -> np.ndarray:
        return self.adapted_scores(w, support, query)[1]


def feature_matrix(w: EvalWorkload, features: str,
                   base: MetaTuneMethod | None = None) -> np.ndarray:
    """Every candidate of ``w`` as a vector: an ``n x d`` array of ``knobs`` (the tuner's
    knob vectors, :mod:`tuner.search.knobs`) or ``embed`` (``base``'s graph embeddings,
    standardized over the workload's candidates)."""
    if features == "embed":
        return standardized(base.workload_inputs(w).double().numpy())
    from tuner.search.knobs import KnobSpace

    return KnobSpace().matrix(w.candidates)


class GPMethod:
    """A MetaTune method followed by the batch BO search's Gaussian process, as the tuner
    ranks candidates: the GP over knob vectors (:mod:`tuner.search.knobs`) whose prior
    mean follows the adapted model's prediction, fitted on the k support samples; the
    query is scored by its posterior mean (:func:`tuner.search.bo_select.posterior_mean`).

    Args:
        base: The adapted model that gives the GP its prior.
        features: What the GP's kernel compares: ``knobs`` (the tuner's) or ``embed`` (the
            model's graph embeddings, standardized over the workload's candidates; an
            experiment, head-only checkpoints).
    """

    def __init__(self, base: MetaTuneMethod, features: str = "knobs") -> None:
        if features not in ("knobs", "embed"):
            raise ValueError(f"GP features {features!r}: choose knobs or embed")
        if features == "embed" and not base.inner.head_only:
            raise ValueError("GP features 'embed' need a checkpoint that adapts the head only "
                             "(its embeddings do not change while it adapts)")
        self.base, self.features = base, features
        self._features: dict[str, np.ndarray] = {}

    def _feature_matrix(self, w: EvalWorkload) -> np.ndarray:
        """The GP's inputs for every candidate of ``w``: an ``n x d`` array."""
        if w.name not in self._features:
            self._features[w.name] = feature_matrix(w, self.features, self.base)
        return self._features[w.name]

    def scores(self, w: EvalWorkload, support: np.ndarray, query: np.ndarray,
               seed: int) -> np.ndarray:
        from tuner.search.bo_select import posterior_mean

        support_prior, query_prior = self.base.adapted_scores(w, support, query)
        if not len(support):
            return query_prior
        x = self._feature_matrix(w)
        y = relative_targets(w.seconds, support)[support]
        return posterior_mean(x[query], query_prior, x[support], support_prior, y,
                              device=torch.device("cpu"))


class EnsembleMethod:
    """The mean of several methods' scores on the same support and query sets (each member
    adapted or fitted on the k samples its own way). Members that predict the relative
    throughput keep that scale in the mean.

    Args:
        members: The methods averaged (e.g. two :class:`MetaTuneMethod` checkpoints).

    Raises:
        ValueError: Fewer than two members.
    """

    def __init__(self, members: list) -> None:
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least two members, got {len(members)}")
        self.members = list(members)

    def scores(self, w: EvalWorkload, support: np.ndarray, query: np.ndarray,
               seed: int) -> np.ndarray:
        return np.mean([np.asarray(m.scores(w, support, query, seed), dtype=float)
                        for m in self.members], axis=0)


class XGBMethod:
    """MetaSchedule's XGBoost cost model, from scratch or with transfer (``base``).

    Args:
        target: The ``tvm.target.Target`` of the data.
        num_cores: XGBoost threads.
        base: The xgb-Xfer base booster, or ``None`` for plain ``xgb``.
    """

    def __init__(self, target, num_cores: int, base=None) -> None:
        self.target, self.num_cores, self.base = target, num_cores, base
        self._last: tuple | None = None  # the last scores (an ensemble may ask again)

    def scores(self, w: EvalWorkload, support: np.ndarray, query: np.ndarray,
               seed: int) -> np.ndarray:
        from tvm.s_tir import meta_schedule as ms
        from tvm.s_tir.meta_schedule.runner import RunnerResult

        if self.base is None and not len(support):  # MetaSchedule's XGBModel without data
            return np.random.default_rng(seed).uniform(size=len(query))
        key = (w.name, support.tobytes(), query.tobytes())
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        model = task_xgb(self.num_cores, self.base)  # trains on exactly the k samples
        ctx = ms.TuneContext(mod=w.mod, target=self.target)
        if len(support):
            model.update(ctx, [w.candidates[i] for i in support],
                         [RunnerResult([float(w.seconds[i])], None) for i in support])
        out = np.asarray(model.predict(ctx, [w.candidates[i] for i in query]), dtype=float)
        self._last = (key, out)
        return out
