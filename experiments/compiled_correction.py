# Last ran on commit 5fede8c
"""A cost model's ranking corrected by what LLVM made of each schedule (issue 13, an
experiment of the accuracy benchmark: ``model_accuracy.py --compiled-correction``).

``residuals.py --compiled`` found that much of the model's miss on a schedule is visible in
its compiled code (whether and how wide LLVM vectorized the hot loop), and that boosted
trees over :mod:`tuner.models.compiled_code`'s counts, trained on other workloads'
residuals, guess it.
Here that correction becomes a method the accuracy benchmark scores at every k, fitted
where nothing scored was trained on: the checkpoint's validation workloads.

Fitting (:func:`fit_correction`): on each validation workload, the model's score before any
measurement and the measured throughput become normal scores ``zp`` and ``z``; the residual
``e = z - corr(z, zp) * zp`` is what the model misses. Trees over the compiled features
(log-scaled, and standardized within the workload) learn ``e`` on the workloads of four
in five of the tasks (a task's NCHW and NHWC twins, or its records in two splits, kept on
one side); on the fifth, unseen by the trees, ``z ~ c0 * zp + c1 * guess`` weighs the
guess (centred within each workload) against the score. Scoring
(:class:`CompiledCorrectionMethod`): the adapted model's query scores ``s`` plus
``(c1 / c0) * std(s) * guess`` (the correction in the scores' units, ``zp`` being about
``(s - mean) / std``), so ranking metrics see the weighted sum and MSE(D) the scores moved
by it. Reading the code costs a build per schedule (about 0.5 s on 2 cores; cached by
trace).

Run as a script, it fits each checkpoint's correction and saves it beside it for the tuner
(``metatune.compiled_correction=true``, :mod:`tuner.models.compiled_correction`)::

    python -m experiments.compiled_correction --checkpoint checkpoints/llvm-znver4-super.ckpt \
        checkpoints/llvm-znver4-super-seed1.ckpt
"""

from __future__ import annotations

import logging
import os

import numpy as np

from bench.common import REPO
from tuner.models.compiled_correction import Correction, centred_guess, workload_features

logger = logging.getLogger(__name__)

FOLDS = 5  #: one in five validation tasks weighs the guess; the rest train the trees


def fit_correction(items: list[dict], seed: int = 0) -> Correction:
    """Fit the correction on workloads the model was not trained on.

    Args:
        items: Per workload: ``prior`` (``n`` model scores before any measurement, higher:
            faster), ``secs`` (``n`` run times), ``features`` (``n x d``,
            :func:`workload_features`; ``d`` the same for every workload) and optionally
            ``group`` (one task's workloads, e.g. its NCHW and NHWC twins, or its records
            in two splits: they weigh the guess or train the trees together). A workload
            the model or its measurements rank nothing in is left out.
        seed: Which groups weigh the guess.

    Returns:
        The trees and the guess's weight.

    Raises:
        ValueError: Fewer than ``FOLDS`` groups (none would weigh the guess).
    """
    from experiments.residuals import _corr, residuals, weighed_trees

    items = [it for it in items
             if min(np.std(it["prior"]), np.std(1.0 / it["secs"])) > 1e-12]
    groups = list(dict.fromkeys(it.get("group", i) for i, it in enumerate(items)))
    if len(groups) < FOLDS:
        raise ValueError(f"{len(groups)} validation tasks: the compiled-code correction needs "
                         f"at least {FOLDS} (train the checkpoint with data.val_fraction > 0)")
    parts = [residuals(it["prior"], it["secs"], it["secs"]) for it in items]
    order = np.random.default_rng(seed).permutation(len(groups))
    weigh_groups = {groups[g] for g in order[::FOLDS]}
    weigh = [j for j, it in enumerate(items) if it.get("group", j) in weigh_groups]
    train = [j for j in range(len(items)) if j not in set(weigh)]
    booster, (c0, c1), guess = weighed_trees(
        [(items[j]["features"], parts[j][2][0]) for j in train],
        [(items[j]["features"], parts[j][0], parts[j][1][0]) for j in weigh], centred_guess)
    e = np.concatenate([parts[j][2][0] for j in weigh])
    weight = max(float(c1), 0.0) / float(c0) if c0 > 0 else 0.0
    stats = {"workloads": len(items), "tasks": len(groups), "train_workloads": len(train),
             "weigh_workloads": len(weigh),
             "samples": int(sum(len(it["prior"]) for it in items)),
             "guess_residual_corr": round(_corr(guess, e), 4),
             "c0": round(float(c0), 4), "c1": round(float(c1), 4), "weight": round(weight, 4)}
    return Correction(booster, weight, stats)


class CompiledCorrectionMethod:
    """An adapted MetaTune method whose query scores the correction moves.

    The global weight was fitted against the model's scores before any measurement and is
    applied as it is after adaptation too (the adapted model may already have absorbed some
    of the miss on larger k). With ``local`` set, the weight is also fitted on the task's
    own k measured candidates, in normal scores as the global one: their targets' ``t``
    regressed on the model's scores' ``x`` *before* adaptation (so the model has not
    fitted these residuals already), slope ``a``, the residual ``r = t - a * x`` then on
    the guess ``g``, and the two weights pooled by precision, the global one ``b`` counted
    as ``local`` candidates of the workload's typical guess:
    ``(g.r / a + local * v * b) / (g.g + local * v)``, ``v`` the mean squared guess over
    the workload; never below 0 (a guess that hurts is turned off, not reversed).

    Args:
        base: The :class:`bench.accuracy.MetaTuneMethod` (adapted on the support set).
        correction: From :func:`fit_correction` on this model's validation workloads.
        features: Workload name -> its :func:`workload_features` (every candidate, in the
            workload's order).
        local: Pseudo-candidates of the global weight (``None``: the global weight alone).
    """

    def __init__(self, base, correction: Correction, features: dict[str, np.ndarray],
                 local: float | None = None) -> None:
        self.base, self.correction, self.features = base, correction, features
        self.local = local
        self._guess: dict[str, np.ndarray] = {}
        self._prior: dict[str, np.ndarray] = {}

    def guess(self, w) -> np.ndarray:
        """The trees' centred guess of the model's residual for every candidate of ``w``
        (zeros, logged once, for a workload without compiled features: the model's
        scores)."""
        if w.name not in self._guess:
            if w.name in self.features:
                self._guess[w.name] = centred_guess(self.correction.booster,
                                                    self.features[w.name])
            else:
                logger.warning("%s: no compiled features: scored by the model alone", w.name)
                self._guess[w.name] = np.zeros(len(w.seconds))
        return self._guess[w.name]

    def prior(self, w) -> np.ndarray:
        """The model's scores of every candidate of ``w`` before adaptation (cached)."""
        if w.name not in self._prior:
            every = np.arange(len(w.seconds))
            self._prior[w.name] = self.base.adapted_scores(w, every[:0], every)[1]
        return self._prior[w.name]

    def weight(self, w, support: np.ndarray) -> float:
        """The guess's weight on ``w`` relative to the model's scores (see the class)."""
        b = self.correction.weight
        if self.local is None or len(support) < 3:
            return b
        from bench.accuracy.workloads import relative_targets
        from experiments.residuals import normal_scores

        g_all = self.guess(w)
        x = normal_scores(self.prior(w)[support])
        t = normal_scores(relative_targets(w.seconds, support)[support])
        g = g_all[support] - g_all[support].mean()
        if float(x @ x) < 1e-12 or float(g @ g) < 1e-12:
            return b
        a = float(x @ t) / float(x @ x)
        if a <= 0:  # the scores do not order this support: nothing to weigh the guess by
            return b
        v = float(np.mean(g_all ** 2))
        return max((float(g @ (t - a * x)) / a + self.local * v * b)
                   / (float(g @ g) + self.local * v), 0.0)

    def scores(self, w, support: np.ndarray, query: np.ndarray, seed: int) -> np.ndarray:
        b = self.weight(w, support)  # before the adaptation below: it may reuse the cache
        s = self.base.adapted_scores(w, support, query)[1]
        return s + b * float(np.std(s)) * self.guess(w)[query]


def validation_target(train_data: str, splits: list[str], data: str | None = None,
                      target=None):
    """The ``tvm.target.Target`` a checkpoint's validation workloads are built for: the
    scored data's ``target`` when the checkpoint was trained on that data, else (or with no
    ``data``) the one its own dataset was measured for (its first split inside
    ``train_data``; the records of other CPUs' splits it also trained on are built for it
    too).

    Args:
        train_data: The dataset the checkpoint was trained on (``data/llvm-znver4``).
        splits: The training splits its validation workloads come from, relative to it.
        data: The dataset scored (``None``: none, the checkpoint's own target is wanted).
        target: The target the scored schedules are built for (``data``'s).

    Raises:
        ValueError: Another dataset than ``data``, and none of ``splits`` is inside it.
    """
    from bench.accuracy.checkpoints import data_target
    from tuner.engine.targets import resolve_target

    if data is not None and os.path.normpath(train_data) == os.path.normpath(data):
        return target
    own = [s for s in splits if not os.path.normpath(s).startswith("..")]
    if not own:
        raise ValueError(f"none of the splits {splits} is inside {train_data}: its target is "
                         "unknown")
    return resolve_target(data_target(os.path.join(train_data, own[0]))).target


def split_features(split_dir: str, workloads: list, target, cache: str) -> dict[str, np.ndarray]:
    """:func:`workload_features` of each workload of one split, built (or read from
    ``cache``) for ``target``; a workload whose records do not replay in order is left out
    (logged).

    Args:
        split_dir: The split the workloads were loaded from.
        workloads: Its :class:`bench.accuracy.EvalWorkload` s.
        target: The ``tvm.target.Target`` to compile for.
        cache: :func:`tuner.models.compiled_code.compiled_features`'s cache folder.
    """
    from experiments.residuals import ordered_traces
    from tuner.models.compiled_code import compiled_features

    traces = ordered_traces(split_dir)
    out = {}
    for w in workloads:
        listed = traces.get(w.name, [])
        if [s for _, s in listed] != list(w.seconds):
            logger.warning("%s: records and replayed candidates differ: no compiled features",
                           w.name)
            continue
        raw = compiled_features(w.name, w.candidates, [t for t, _ in listed], target, cache)
        out[w.name] = workload_features(raw)
    return out


def validation_items(method, names: list[str], splits: list[str], data: str, target,
                     cache: str, progress=None) -> list[dict]:
    """:func:`fit_correction`'s items: a checkpoint's validation workloads, each scored by
    ``method`` before any measurement.

    Args:
        method: The checkpoint's :class:`bench.accuracy.MetaTuneMethod`.
        names, splits: Its validation workloads and the splits they are drawn from
            (:func:`model_accuracy.validation_workloads`).
        data: The dataset it was trained on (its splits are relative to it).
        target: The ``tvm.target.Target`` the compiled features are built for.
        cache: :func:`tuner.models.compiled_code.compiled_features`'s cache folder.
        progress: Called with a line per split.
    """
    from bench.accuracy.workloads import load_eval_workloads

    items = []
    for split in splits:
        split_dir = os.path.normpath(os.path.join(data, split))
        workloads = load_eval_workloads(split_dir, (method.mode,), 16, names=names)
        features = split_features(split_dir, workloads, target, cache)
        for w in workloads:
            if w.name in features:
                # the method caches by name: a name in two splits has two sets of candidates
                raw_name, w.name = w.name, f"{w.name} [{split}]"
                everything = np.arange(len(w.seconds))
                prior = method.adapted_scores(w, everything[:0], everything)[1]
                items.append({"prior": prior, "secs": w.seconds, "features": features[raw_name],
                              "group": raw_name.removesuffix("_nhwc")})
        if progress:
            progress(f"{split_dir}: {len(workloads)} validation workloads")
    return items


def main(argv: list[str] | None = None) -> list[dict]:
    """Fit each checkpoint's correction on its validation workloads and save it beside it
    (``<checkpoint>.asm.json``), for the tuner's ``metatune.compiled_correction=true``.

    Returns:
        Per checkpoint, what was saved: the fit's statistics and provenance.
    """
    import argparse
    import time

    from bench.accuracy.checkpoints import validation_workloads
    from bench.accuracy.methods import MetaTuneMethod
    from bench.common import provenance
    from tuner.engine.intrinsics import load_tensor_intrinsics
    from tuner.engine.platforms import checkpoint_data
    from tuner.engine.targets import resolve_target
    from tuner.models.compiled_correction import correction_path
    from tuner.models.trained import load_model

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--checkpoint", nargs="+", required=True,
                   help="the checkpoints (a pair the tuner averages: name both)")
    p.add_argument("--cache", default="work/cache/compiled",
                   help="the compiled-code features' cache (a new one starts from data/compiled)")
    p.add_argument("--seed", type=int, default=0, help="which validation tasks weigh the guess")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    done = []
    for checkpoint in args.checkpoint:
        start = time.perf_counter()
        try:
            data = os.path.join(REPO, checkpoint_data(checkpoint)["dir"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"{checkpoint}: its sidecar names no dataset ({err}); train it "
                             "with train.py, which writes it") from err
        names, splits = validation_workloads([checkpoint], data, "--checkpoint")
        try:
            target = validation_target(data, splits)
        except ValueError as err:
            raise SystemExit(f"--checkpoint {checkpoint}: {err}") from err
        load_tensor_intrinsics((str(target.kind.name),))
        items = validation_items(MetaTuneMethod(load_model(checkpoint, graph=None)), names,
                                 splits, data, target, args.cache,
                                 lambda msg: logger.info("%s", msg))
        try:
            fit = fit_correction(items, seed=args.seed)
        except ValueError as err:
            raise SystemExit(f"--checkpoint {checkpoint}: {err}") from err
        prov = provenance("experiments.compiled_correction")
        prov.update(checkpoint=os.path.relpath(checkpoint, REPO),
                    data=os.path.relpath(data, REPO), splits=splits,
                    features_target=resolve_target(str(target)).description,
                    fit_seed=args.seed,
                    wall_s=round(time.perf_counter() - start, 1))
        out = correction_path(checkpoint)
        fit.save(out, prov)
        logger.info("saved %s: weight %.3f, %s", out, fit.weight, fit.stats)
        done.append({"out": out, "stats": fit.stats, "provenance": prov})
    return done


if __name__ == "__main__":
    main()
