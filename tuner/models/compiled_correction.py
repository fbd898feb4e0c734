"""A cost model's scores corrected by what LLVM made of each schedule.

Boosted trees over :mod:`tuner.models.compiled_code`'s counts guess what the cost model
misses on a schedule (whether and how wide LLVM vectorized its hot loop, ...), fitted on
the checkpoint's validation workloads (``bench/compiled_correction.py``, which also saves
them beside the checkpoint). Here is what the tuner needs of them:

- :class:`Correction`, saved and loaded as one JSON file (the trees, their weight, what
  they were fitted on, and how);
- :class:`CompiledReranker`, which the batch BO search asks to correct its scores each
  round: the pool's best ``top`` candidates by the cost model are built (in worker
  processes, their features cached by the schedule's structural hash) and the scores of
  every candidate built so far moved by ``weight x std(scores) x guess``, the guess centred
  over them. The rest keep the model's score.

Reading the code costs a build per candidate (about 0.1-0.3 s on 2 cores), which is why
only a short list is corrected.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import numpy as np

from metatune.errors import CheckpointError

logger = logging.getLogger(__name__)

FORMAT = "metatune-compiled-correction"  #: the file's ``format`` field


@dataclasses.dataclass
class Correction:
    """Trees that guess the model's residual from compiled features, and their weight.

    Attributes:
        booster: ``xgboost.Booster`` over :func:`workload_features` rows.
        weight: The guess's weight relative to the model's score (``c1 / c0``, normal-score
            units; 0 when the guess did not help on the weighing workloads).
        stats: What the fit saw: workloads, samples, the guess's correlation with the
            weighing workloads' residual, ``c0`` and ``c1``.
    """

    booster: object
    weight: float
    stats: dict

    def save(self, path: str, provenance: dict) -> None:
        """Write the correction as one JSON file (atomically).

        Args:
            path: Where (``checkpoints/<name>.asm.json``).
            provenance: How, where and when it was fitted (command, machine, date, the
                checkpoints and data it was fitted for).
        """
        from metatune.files import write_json_atomic
        from tuner.models.compiled_code import FEATURE_NAMES, VERSION

        write_json_atomic(path, {
            "format": FORMAT, "feature_version": VERSION, "features": len(FEATURE_NAMES),
            "weight": self.weight, "stats": self.stats, "provenance": provenance,
            "booster": json.loads(bytes(self.booster.save_raw("json")).decode())})

    @staticmethod
    def load(path: str) -> tuple["Correction", dict]:
        """Read a file :meth:`save` wrote.

        Returns:
            The correction and its provenance.

        Raises:
            CheckpointError: Missing, unreadable, not a correction, or fitted on another
                version of the compiled-code features.
        """
        import xgboost as xgb

        from tuner.models.compiled_code import FEATURE_NAMES, VERSION

        fit_again = ("python bench/compiled_correction.py --checkpoint "
                     f"{path.removesuffix('.asm.json')}.ckpt")
        try:
            with open(path, encoding="utf-8") as f:
                blob = json.load(f)
            if blob.get("format") != FORMAT:
                raise ValueError(f"format {blob.get('format')!r}, not {FORMAT!r}")
            booster = xgb.Booster()
            booster.load_model(bytearray(json.dumps(blob["booster"]).encode()))
            weight = float(blob["weight"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError,
                xgb.core.XGBoostError) as err:
            raise CheckpointError(
                f"compiled-code correction {path}: cannot be read ({err}); fit it again "
                f"({fit_again}) or turn it off (metatune.compiled_correction=false)") from err
        if blob.get("feature_version") != VERSION or blob.get("features") != len(FEATURE_NAMES):
            raise CheckpointError(
                f"compiled-code correction {path}: fitted on compiled-code features version "
                f"{blob.get('feature_version')}, this code reads version {VERSION}; fit it "
                f"again ({fit_again})")
        return Correction(booster, weight, dict(blob.get("stats") or {})), dict(
            blob.get("provenance") or {})


def workload_features(raw: np.ndarray) -> np.ndarray:
    """``n x 2d``: one workload's compiled features (``n x d`` as :func:`tuner.models.
    compiled_code.compiled_features` returns them), log-scaled, beside the same
    standardized within the workload; a schedule that did not build (``nan``) gets each
    feature's median."""
    from metatune.metrics import standardized
    from tuner.models.compiled_code import log_counts

    x = log_counts(raw)
    return np.hstack([x, standardized(x)])


def centred_guess(booster, features: np.ndarray) -> np.ndarray:
    """The trees' guess for one workload's candidates, less its mean (the residual it
    guesses is centred within each workload: only differences between candidates count)."""
    import xgboost as xgb

    g = booster.predict(xgb.DMatrix(features)).astype(float)
    return g - g.mean()


class CompiledReranker:
    """Corrects the cost model's scores of a search's short list by their compiled code.

    One instance serves every task of a tuning session (its worker processes start once);
    :meth:`shutdown` stops them. A cost model averaging several checkpoints has one
    correction per checkpoint, each applied to its own member's scores (as the accuracy
    benchmark scores ``NAME+asm`` members), and the corrected scores are averaged.

    Args:
        corrections: One :class:`Correction` per member of the cost model, in its order.
        cost_model: The MetaTune cost model whose scores are corrected (its
            ``member_scores(context, candidates, keys)``: ``members x candidates``; the Python
            object: the search is handed MetaSchedule's wrapper, which has no such method).
        target: The ``tvm.target.Target`` the candidates are built for (the tuning
            target: the code is read, not run).
        top: How many of the eligible candidates (the pool), the best by the model's mean
            score, are built each round.
        workers: Build processes.
        timeout_sec: Time limit of one build (a candidate that does not build in time keeps
            the model's score).
    """

    def __init__(self, corrections: list[Correction], cost_model, target, *, top: int = 32,
                 workers: int = 1, timeout_sec: float = 30.0) -> None:
        self.corrections, self.cost_model, self.target = list(corrections), cost_model, target
        self.top, self.workers, self.timeout_sec = int(top), max(1, int(workers)), timeout_sec
        self._features: dict[int, np.ndarray] = {}  # structural hash -> raw features
        self._pool = None

    def _get_pool(self):
        from tuner.engine.builder import initialized_pool

        if self._pool is None:
            self._pool = initialized_pool(self.workers, self.timeout_sec,
                                          (str(self.target.kind.name),))
        return self._pool

    def _build(self, mods: list, hashes: list[int]) -> None:
        """Build ``mods`` in the workers and cache their features (``nan`` for a failure)."""
        from tvm.support.popen_pool import StatusKind

        from tuner.models.compiled_code import FEATURE_NAMES, module_features

        target = self.target
        jobs = self._get_pool().map_with_error_catching(
            lambda mod: module_features(mod, target).tolist(), mods)
        failed = 0
        for h, res in zip(hashes, jobs):
            if res.status == StatusKind.COMPLETE:
                self._features[h] = np.asarray(res.value, float)
            else:
                failed += 1
                self._features[h] = np.full(len(FEATURE_NAMES), np.nan)
        if failed:
            logger.warning("compiled-code correction: %d of %d candidates did not build in time "
                           "or at all: they keep the cost model's score", failed, len(mods))

    def scores(self, context, candidates: list, eligible: np.ndarray) -> np.ndarray:
        """The cost model's scores of ``candidates`` in ``context``'s task, corrected
        (:meth:`correct`; the candidates are hashed once for both)."""
        from tuner.models.cost_model import candidate_keys

        keys = candidate_keys(candidates)
        return self.correct(candidates, self.cost_model.member_scores(context, candidates, keys),
                            eligible, keys)

    def correct(self, candidates: list, member_scores: np.ndarray, eligible: np.ndarray,
                keys: list[int] | None = None) -> np.ndarray:
        """The members' mean score, each corrected where the compiled code is known.

        Args:
            candidates: ``n`` ``MeasureCandidate`` s (the search's history and pool).
            member_scores: ``m x n`` scores (higher: faster), one row per member of the cost
                model (``m = len(corrections)``).
            eligible: Indices of the candidates that may be built now (the pool): the
                ``top`` best of them by the mean score are, unless built before.
            keys: The candidates' structural hashes (:func:`tuner.models.cost_model.
                candidate_keys`) when the caller has them.

        Returns:
            ``n`` scores: the mean over members of ``s + weight x std(s) x guess`` for the
            candidates built now or before (the guess centred over them), of ``s`` for the
            others.

        Raises:
            ValueError: ``member_scores`` has another number of rows than corrections.
        """
        from tuner.models.cost_model import candidate_keys

        member_scores = np.atleast_2d(np.asarray(member_scores, dtype=float))
        if len(member_scores) != len(self.corrections):
            raise ValueError(f"{len(member_scores)} members' scores for "
                             f"{len(self.corrections)} corrections")
        mean = member_scores.mean(0)
        eligible = np.asarray(eligible, dtype=int)
        if len(mean) < 2 or not len(eligible):
            return mean
        hashes = keys if keys is not None else candidate_keys(candidates)
        short = eligible[np.argsort(-mean[eligible], kind="stable")[: self.top]]
        new = list(dict.fromkeys(int(i) for i in short if hashes[i] not in self._features))
        if new:
            self._build([candidates[i].sch.mod for i in new], [hashes[i] for i in new])
        known = [i for i, h in enumerate(hashes) if h in self._features]
        raw = np.stack([self._features[hashes[i]] for i in known]) if known else None
        if len(known) < 2 or np.isnan(raw).all():
            return mean
        features = workload_features(raw)
        out = member_scores.copy()
        for row, fit in zip(out, self.corrections):
            if fit.weight > 0:
                row[known] += fit.weight * float(np.std(row)) * centred_guess(fit.booster,
                                                                              features)
        return out.mean(0)

    def shutdown(self) -> None:
        """Stop the build workers."""
        if self._pool is not None:
            from tuner.engine.builder import stop_pool

            pool, self._pool = self._pool, None
            stop_pool(pool)


def correction_path(checkpoint: str) -> str:
    """Where ``bench/compiled_correction.py`` saves the correction of ``checkpoint`` (and
    the tuner looks for it with ``metatune.compiled_correction=true``)."""
    return os.path.splitext(checkpoint)[0] + ".asm.json"
