"""Cost-model accuracy on held-out workloads after adapting on k measured samples.

For every held-out workload (the convolutions of the four networks, never trained on) and
seed, a fixed query set of ``query`` measured candidates is drawn, and a support set of k
other measured candidates plays the part of the measurements a tuner would have made. Each
method fits on the support set and scores the query set:

- MetaTune checkpoints (``metatune-super``, ``metatune-plain``, ablation variants): each
  adapted on the support set by its :class:`metatune.maml.InnerLoop`, exactly as the tuner
  fine-tunes it online;
- ``NAME+gp``: a checkpoint followed by the batch BO search's GP, as the tuner ranks
  (:class:`GPMethod`);
- ``NAME+xgb``: a checkpoint's adapted prediction blended with MetaSchedule's XGBoost
  trained on the support set, the latter weighted ``k / (k + k0)`` (:class:`BlendMethod`);
- ``NAME+ridge``: a checkpoint plus a task-local ridge regression on its residuals
  (:class:`RidgeMethod`), and ``xgb-knobs``, XGBoost on the knob vectors from scratch
  (:class:`KnobXGBMethod`): experiments on how much a task's own samples add;
- ``xgb``: MetaSchedule's ``XGBModel`` trained from scratch on the support set (at k = 0 it
  has no data and, like MetaSchedule, scores at random);
- ``xgb-Xfer``: :class:`tuner.models.xgb_transfer.XferXGBModel`, pre-trained on the training split
  and refit on the support set (at k = 0 the pre-trained model alone).

Targets are what a tuner can know: throughput relative to the best *support* candidate
(``best_support / seconds``), or to the workload's best when k = 0. Metrics
(:mod:`metatune.metrics`): MSE, MSE(D) (top 25 % of the query by measured throughput),
pairwise ranking accuracy and top-5 recall.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from metatune import metrics
from metatune.dataset import iter_replayed, workload_order
from metatune.graph import encode
from metatune.metrics import standardized
from tuner.engine.database import as_candidate
from tuner.models.cost_model import blend_share
from tuner.models.xgb_transfer import task_xgb

logger = logging.getLogger(__name__)

KS = (0, 8, 16, 32, 64)
METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "mse": metrics.mse,
    "mse_d": metrics.mse_top,
    "pairwise": metrics.pairwise_accuracy,
    "top5_recall": metrics.top_k_recall,
}


@dataclass
class EvalWorkload:
    """The measured candidates of one held-out workload.

    Attributes:
        name: ``network/task``.
        mod: The workload's ``IRModule``.
        candidates: MetaSchedule ``MeasureCandidate`` per measured schedule.
        seconds: A ``n`` array of measured mean run times.
        graphs: Graph mode -> ``n`` PyG graphs of the same candidates.
    """

    name: str
    mod: object
    candidates: list
    seconds: np.ndarray
    graphs: dict[str, list] = field(default_factory=dict)


def load_eval_workloads(split_dir: str, modes: tuple[str, ...], min_samples: int,
                        limit: int | None = None,
                        names: list[str] | None = None) -> list[EvalWorkload]:
    """Replay a split's valid records into candidates and graphs.

    Args:
        split_dir: ``data/<target>/heldout``.
        modes: Graph modes to encode (``super``, ``plain``).
        min_samples: Workloads with fewer valid samples are skipped (with a warning).
        limit: Keep only the first ``limit`` workloads of ``meta.json``.
        names: Keep only these workloads (e.g. a checkpoint's validation workloads).
    """
    order = [w["name"] for w in workload_order(split_dir)
             if names is None or w["name"] in names][:limit]
    wanted = set(order)
    found: dict[str, EvalWorkload] = {}
    secs: dict[str, list[float]] = {}
    for item in iter_replayed(split_dir, wanted):
        name = item.info["name"]
        w = found.setdefault(name, EvalWorkload(name, item.workload.mod, [], np.zeros(0),
                                                {m: [] for m in modes}))
        w.candidates.append(as_candidate(item.sch))
        secs.setdefault(name, []).append(item.seconds)
        for m in modes:
            w.graphs[m].append(encode(item.sch.mod["main"], m))
    out = []
    for name in order:
        if name not in found or len(secs[name]) < min_samples:
            logger.warning("%s: %d valid samples, fewer than %d: skipped", name,
                           len(secs.get(name, [])), min_samples)
            continue
        found[name].seconds = np.asarray(secs[name], dtype=float)
        out.append(found[name])
    return out


def load_split_workloads(data_dir: str, splits: list[str], modes: tuple[str, ...],
                         min_samples: int, names: list[str],
                         limit: int | None = None) -> list[EvalWorkload]:
    """``names`` from several splits of a dataset (a checkpoint's validation workloads,
    drawn from every split it trained on). A workload found in more than one split
    (another CPU's measurements of the same task) is scored once per split, its name
    suffixed with the split's (``name [../llvm-rocketlake/train-networks]``), so that no
    cache keyed by name mixes two CPUs' candidates.

    Args:
        data_dir: The dataset the splits are relative to.
        splits: Split directories, relative to ``data_dir``.
        modes: Graph modes to encode.
        min_samples: Workloads with fewer valid samples are skipped.
        names: The workloads to load.
        limit: Keep only the first ``limit`` of them.
    """
    per_split = []
    for sp in splits:
        listed = {w["name"] for w in workload_order(os.path.join(data_dir, sp))}
        wanted = [n for n in names if n in listed]
        if wanted:
            per_split.append((sp, load_eval_workloads(os.path.join(data_dir, sp), modes,
                                                      min_samples, names=wanted)))
    seen = Counter(w.name for _, ws in per_split for w in ws)
    out = []
    for sp, ws in per_split:
        for w in ws:
            if seen[w.name] > 1:
                w.name = f"{w.name} [{sp}]"
            out.append(w)
    return out[:limit]


def split_indices(n: int, k: int, query: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(support, query)`` indices: the query set depends on the seed only, not on k."""
    perm = np.random.default_rng(seed).permutation(n)
    return perm[query:query + k], perm[:query]


def relative_targets(seconds: np.ndarray, support: np.ndarray) -> np.ndarray:
    """``best / seconds`` with ``best`` the support set's best (the workload's if empty)."""
    best = seconds[support].min() if len(support) else seconds.min()
    return best / seconds


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
        kept, so the methods built on this one, ``+gp`` and ``+ridge``, adapt once).

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
        kernel: ``knobs`` or ``knobs+prior`` (the adapted prediction as a kernel input as
            well; :func:`tuner.search.bo_select.fit_gp`), as ``search_params.bo.kernel``.
    """

    def __init__(self, base: MetaTuneMethod, features: str = "knobs",
                 kernel: str = "knobs") -> None:
        from tuner.search.params import GP_KERNELS

        if features not in ("knobs", "embed"):
            raise ValueError(f"GP features {features!r}: choose knobs or embed")
        if kernel not in GP_KERNELS:
            raise ValueError(f"GP kernel {kernel!r}: choose {' or '.join(GP_KERNELS)}")
        if features == "embed" and not base.inner.head_only:
            raise ValueError("GP features 'embed' need a checkpoint that adapts the head only "
                             "(its embeddings do not change while it adapts)")
        self.base, self.features, self.kernel = base, features, kernel
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
                              device=torch.device("cpu"), kernel=self.kernel)


class RidgeMethod:
    """A MetaTune method followed by a task-local ridge regression on what it misses (an
    experiment, after R2-D2's closed-form heads, Bertinetto et al. 2019): the adapted
    prediction shifted to the support set's mean target (its scale kept, so that few
    samples cannot invert its ranking), plus a ridge regression over the candidates'
    standardized features fitted to the support set's residuals.

    Args:
        base: The adapted model.
        features: ``knobs`` (the tuner's knob vectors) or ``embed`` (the model's graph
            embeddings; head-only checkpoints).
        lam: The ridge penalty (in units of standardized features; large keeps the
            model's ranking until many samples disagree with it).
    """

    def __init__(self, base: MetaTuneMethod, features: str = "knobs", lam: float = 100.0) -> None:
        if features not in ("knobs", "embed"):
            raise ValueError(f"ridge features {features!r}: choose knobs or embed")
        if features == "embed" and not base.inner.head_only:
            raise ValueError("ridge features 'embed' need a checkpoint that adapts the head "
                             "only (its embeddings do not change while it adapts)")
        self.base, self.features, self.lam = base, features, float(lam)
        self._features: dict[str, np.ndarray] = {}

    def scores(self, w: EvalWorkload, support: np.ndarray, query: np.ndarray,
               seed: int) -> np.ndarray:
        support_prior, query_prior = self.base.adapted_scores(w, support, query)
        if len(support) < 3:
            return query_prior
        y = relative_targets(w.seconds, support)[support]
        shift = float(y.mean() - support_prior.mean())
        if w.name not in self._features:
            self._features[w.name] = standardized(feature_matrix(w, self.features, self.base))
        x = self._features[w.name]
        xs, residual = x[support], y - support_prior - shift
        beta = np.linalg.solve(xs.T @ xs + self.lam * np.eye(x.shape[1]), xs.T @ residual)
        return query_prior + shift + x[query] @ beta


class KnobXGBMethod:
    """XGBoost regression from scratch on the k samples' knob vectors (an experiment: how
    much a task-local model learns from the tuner's own coordinates; random at k < 3).

    Args:
        rounds: Boosting rounds.
        depth: Tree depth.
    """

    def __init__(self, rounds: int = 50, depth: int = 3) -> None:
        self.rounds, self.depth = int(rounds), int(depth)
        self._features: dict[str, np.ndarray] = {}

    def scores(self, w: EvalWorkload, support: np.ndarray, query: np.ndarray,
               seed: int) -> np.ndarray:
        import xgboost as xgb

        if len(support) < 3:
            return np.random.default_rng(seed).uniform(size=len(query))
        if w.name not in self._features:
            self._features[w.name] = feature_matrix(w, "knobs")
        x = self._features[w.name]
        y = relative_targets(w.seconds, support)[support]
        booster = xgb.train({"max_depth": self.depth, "eta": 0.3, "nthread": 1,
                             "objective": "reg:squarederror", "verbosity": 0},
                            xgb.DMatrix(x[support], label=y), self.rounds)
        return booster.predict(xgb.DMatrix(x[query])).astype(float)


class BlendMethod:
    """A MetaTune method blended with XGBoost trained on the task's own samples: the
    adapted prediction weighted ``k0 / (k + k0)`` plus ``xgb``'s (MetaSchedule's per-store
    features, from scratch on the k samples) weighted ``k / (k + k0)``. Both predict the
    relative throughput, so the blend keeps its scale; at k = 0 it is the model alone, and
    the task's samples take over as they accumulate (half the weight at k = k0).

    Args:
        base: The adapted model.
        xgb: The task-local XGBoost (:class:`XGBMethod` without a base model).
        k0: The number of samples at which both weigh the same.
    """

    def __init__(self, base: MetaTuneMethod, xgb: XGBMethod, k0: float = 64.0) -> None:
        if k0 <= 0:
            raise ValueError(f"blend k0 must be positive, got {k0}")
        self.base, self.xgb, self.k0 = base, xgb, float(k0)

    def weight(self, k: int) -> float:
        """XGBoost's share of the blend after ``k`` samples (the tuner's own rule)."""
        return blend_share(k, self.k0)

    def scores(self, w: EvalWorkload, support: np.ndarray, query: np.ndarray,
               seed: int) -> np.ndarray:
        prior = self.base.adapted_scores(w, support, query)[1]
        if not len(support):
            return prior
        share = self.weight(len(support))
        return (1.0 - share) * prior + share * self.xgb.scores(w, support, query, seed)


class EnsembleMethod:
    """The mean of several methods' scores on the same support and query sets (each member
    adapted or fitted on the k samples its own way). Members that predict the relative
    throughput keep that scale in the mean.

    Args:
        members: The methods averaged (e.g. two :class:`MetaTuneMethod` checkpoints).

    Raises:
        ValueError: Fewer than two members.
    """

    def __init__(self, members: list[MetaTuneMethod]) -> None:
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
        self._last: tuple | None = None  # the last scores (methods built on this one reuse them)

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


def evaluate(workloads: list[EvalWorkload], methods: dict, ks: tuple[int, ...], seeds: list[int],
             query: int, progress: Callable[[str], None] | None = None) -> list[dict]:
    """Score every method on every workload, k and seed.

    Returns:
        One row per (method, k, seed, workload) with the four metrics.
    """
    rows = []
    for seed in seeds:
        for w in workloads:
            for k in ks:
                support, q = split_indices(len(w.seconds), k, query, seed)
                target = relative_targets(w.seconds, support)[q]
                for name, method in methods.items():
                    pred = method.scores(w, support, q, seed)
                    row = {"method": name, "k": k, "seed": seed, "workload": w.name}
                    row.update({m: f(pred, target) for m, f in METRICS.items()})
                    rows.append(row)
            if progress:
                progress(f"seed {seed}: {w.name}")
    return rows


def summarize(rows: list[dict]) -> dict:
    """Per method and k: each metric's mean over workloads, median (min, max) over seeds.

    Returns:
        ``{method: {k: {metric: {"median", "min", "max"}}}}`` (k as a string key).
    """
    out: dict = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        out[method] = {}
        for k in sorted({r["k"] for r in rows}):
            sel = [r for r in rows if r["method"] == method and r["k"] == k]
            seeds = sorted({r["seed"] for r in sel})
            out[method][str(k)] = {}
            for m in METRICS:
                per_seed = [float(np.nanmean([r[m] for r in sel if r["seed"] == s]))
                            for s in seeds]
                out[method][str(k)][m] = {"median": float(np.median(per_seed)),
                                          "min": float(min(per_seed)),
                                          "max": float(max(per_seed))}
    return out
