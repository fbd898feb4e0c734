"""xgb-Xfer: MetaSchedule's XGBoost cost model with AutoTVM-style transfer learning.

The paper's ``xgb-Xfer`` baseline is AutoTVM's XGBoost tuner with transfer learning (TVM
v0.7): a base model trained on the records of earlier tasks supplies a *base margin* to the
new task's model, discounted as the model gathers its own data (``1 / 2 ** (n / 64)``, as
AutoTVM's ``XGBoostCostModel``), and dropped below 0.05. MetaSchedule shares one XGBoost
model among all tasks of a run, so ``n`` counts the measurements of every task: on a whole
network the base model fades after about 280 trials in all. Here the base model is a
MetaSchedule ``XGBModel`` (same per-store features, same objective) trained on every
workload of the dataset's training split, and :class:`XferXGBModel` is MetaSchedule's
``XGBModel`` whose training and prediction add that margin.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import XGBModel  # a derived object: subclass ._cls

from metatune.dataset import as_split_dirs, iter_replayed, left_out_workloads, split_fingerprint
from metatune.errors import MetaTuneError
from tuner.engine.database import as_candidate

logger = logging.getLogger(__name__)


class XferError(MetaTuneError):
    """The transfer base model cannot be built or loaded."""


def _discount(num_samples: int) -> float:
    """AutoTVM's base-model discount after ``num_samples`` measurements of the task."""
    return 1.0 / (2 ** (num_samples / 64.0))


def candidate_features(model: XGBModel, context, candidates) -> list[np.ndarray]:
    """Per-store features of the candidates, as MetaSchedule's XGBModel extracts them."""
    return [x.numpy().astype("float32") for x in model.extractor.extract_from(context, candidates)]


def train_base_booster(split_dir: str | list[str], target, num_cores: int,
                       leave_out: Collection[str] = ()):
    """Train MetaSchedule's XGBoost on every workload of one or more dataset splits.

    Targets are MetaSchedule's own: each workload's best run time over the candidate's
    (``min_cost / cost``), one group per workload (and split).

    Args:
        split_dir: ``data/<target>/train``, or several splits trained on together.
        target: The ``tvm.target.Target`` the features are extracted for.
        num_cores: Threads for XGBoost.
        leave_out: Workload names not trained on, in any split (a validation fold).

    Returns:
        The trained ``xgboost.Booster``.
    """
    from tvm.s_tir import meta_schedule as ms

    dirs = as_split_dirs(split_dir)
    groups: dict[tuple[str, str], tuple] = {}
    for n, d in enumerate(dirs, 1):  # replaying the records takes most of the time
        logger.info("xgb-Xfer base model: replaying the records of %s (%d / %d)", d, n,
                    len(dirs))
        for item in iter_replayed(d):
            if item.info["name"] in leave_out:
                continue
            key = (d, item.info["name"])
            if key not in groups:
                groups[key] = (item.workload.mod, [], [])
            groups[key][1].append(as_candidate(item.sch))
            groups[key][2].append(item.seconds)
    if not groups:
        raise XferError(f"{', '.join(dirs)}: no valid records to pre-train xgb-Xfer on "
                        "(collect the dataset first: python collect.py run)")
    model = XGBModel(num_warmup_samples=0, num_tuning_cores=num_cores, verbose_eval=0)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    step = max(1, len(groups) // 10)
    for i, (mod, cands, secs) in enumerate(groups.values(), 1):
        ctx = ms.TuneContext(mod=mod, target=target)
        xs += candidate_features(model, ctx, cands)
        secs = np.asarray(secs, dtype=float)
        ys.append(secs.min() / secs)
        if i % step == 0 or i == len(groups):
            logger.info("xgb-Xfer base model: features of %d / %d workloads", i, len(groups))
    model._train(xs, np.concatenate(ys))  # the routine XGBModel.update trains with
    logger.info("xgb-Xfer base model: %d workloads, %d samples", len(groups), len(xs))
    return model.booster


def base_booster(split_dir: str | list[str], target, num_cores: int, cache_dir: str,
                 leave_out_networks: Collection[str] = ()):
    """The xgb-Xfer base model of a split (or of several together), trained once and cached.

    Args:
        split_dir: ``data/<target>/train``, or several splits.
        target: The ``tvm.target.Target``.
        num_cores: Threads for XGBoost.
        cache_dir: Where the trained booster is kept (keyed by the data files and the
            networks left out).
        leave_out_networks: Train on no workload these networks use (``meta.json``'s
            ``networks``), as ``train.py data.leave_out_networks=[...]`` leaves them out of a
            checkpoint's training: a validation fold.

    Raises:
        XferError: The split has no data, or the cached booster is unreadable.
        ConfigError: A network of ``leave_out_networks`` uses no workload of the splits.
    """
    import xgboost as xgb

    dirs = as_split_dirs(split_dir)
    for d in dirs:
        if not os.path.isfile(os.path.join(d, "meta.json")):
            raise XferError(f"{d}/meta.json not found: xgb-Xfer pre-trains on the "
                            "dataset's training split (python collect.py run)")
    leave_out = (left_out_workloads(dirs, leave_out_networks, "leave_out_networks")
                 if leave_out_networks else set())
    os.makedirs(cache_dir, exist_ok=True)
    key = "-".join(split_fingerprint(d) for d in dirs)  # one split: its fingerprint, as before
    if leave_out_networks:
        key += "-without-" + "-".join(sorted(leave_out_networks))
    path = os.path.join(cache_dir, f"xgb-xfer-{key}.json")
    if os.path.isfile(path):
        booster = xgb.Booster()
        try:
            booster.load_model(path)
            return booster
        except xgb.core.XGBoostError as err:
            logger.warning("cached base model %s unreadable (%s): retraining", path, err)
    logger.info("training the xgb-Xfer base model on %s (once; cached in %s)", ", ".join(dirs),
                cache_dir)
    booster = train_base_booster(split_dir, target, num_cores, leave_out)
    booster.save_model(path)
    return booster


def task_xgb(num_cores: int, base=None):
    """MetaSchedule's XGBoost fitted on exactly one task's measurements: no warm-up and no
    adaptive skipping, so every update retrains on all of them (the accuracy benchmark's
    ``xgb`` / ``xgb-Xfer``).

    Args:
        num_cores: XGBoost threads.
        base: The xgb-Xfer base booster (:func:`base_booster`), or ``None`` for a model
            from scratch.
    """
    kw = dict(num_warmup_samples=0, adaptive_training=False, verbose_eval=0,
              num_tuning_cores=num_cores)
    return XGBModel(**kw) if base is None else XferXGBModel(base=base, **kw)


@derived_object
class XferXGBModel(XGBModel._cls):
    """MetaSchedule's ``XGBModel`` with a discounted base margin from a pre-trained booster.

    Args:
        base: The pre-trained ``xgboost.Booster`` (see :func:`base_booster`).
        **kwargs: ``XGBModel`` arguments.
    """

    def __init__(self, *, base, **kwargs) -> None:
        super().__init__(**kwargs)
        self.base = base
        self.weight = 1.0  # base-margin weight the current booster was trained with

    def _margin(self, dmatrix, weight: float) -> np.ndarray | None:
        if weight <= 0.0:
            return None
        return weight * self.base.predict(dmatrix, output_margin=True)

    def _train(self, xs: list[np.ndarray], ys: np.ndarray) -> None:
        import xgboost as xgb
        from tvm.s_tir.meta_schedule.cost_model.xgb_model import PackSum, _get_custom_call_back

        self.d_train = PackSum(xs=xs, ys=ys)
        weight = _discount(self.data_size)
        self.weight = weight if weight >= 0.05 else 0.0
        margin = self._margin(self.d_train.dmatrix, self.weight)
        if margin is not None:
            self.d_train.dmatrix.set_base_margin(margin)
        d_train = self.d_train
        self.booster = xgb.train(
            self.config.to_dict(), d_train.dmatrix, num_boost_round=10000,
            obj=lambda pred, _: d_train.obj_square_error(pred),
            callbacks=[_get_custom_call_back(
                early_stopping_rounds=self.early_stopping_rounds,
                verbose_eval=self.verbose_eval,
                fevals=[lambda pred, _: d_train.rmse(pred),
                        lambda pred, _: d_train.average_peak_score(pred, self.average_peak_n)],
                evals=[(d_train.dmatrix, "tr")], cvfolds=None)],
        )
        del self.d_train

    def _predict(self, xs: list[np.ndarray]) -> np.ndarray:
        from tvm.s_tir.meta_schedule.cost_model.xgb_model import PackSum

        d_test = PackSum(xs=xs, ys=None)
        if self.booster is None or self.data_size < self.num_warmup_samples:
            pred = self._margin(d_test.dmatrix, 1.0)  # no data of the task yet: the base model
        else:
            margin = self._margin(d_test.dmatrix, self.weight)
            if margin is not None:
                d_test.dmatrix.set_base_margin(margin)
            pred = self.booster.predict(d_test.dmatrix)
        return d_test.predict_with_score(pred)

    def predict(self, context, candidates) -> np.ndarray:
        """Scores of the candidates (the base model alone until the task has data)."""
        return self._predict(candidate_features(self, context, candidates)).astype("float64")
