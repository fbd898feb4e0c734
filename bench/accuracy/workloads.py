"""The scored workloads: measured candidates replayed from a split, and the support and
query sets drawn from them."""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from metatune.dataset import iter_replayed, workload_order
from metatune.graph import encode
from tuner.engine.database import as_candidate

logger = logging.getLogger(__name__)


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
