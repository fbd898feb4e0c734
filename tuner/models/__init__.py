"""Learned cost models as MetaSchedule ``PyCostModel`` s: MetaTune's GCN
(:mod:`tuner.models.cost_model`; several checkpoints averaged:
:mod:`tuner.models.ensemble`), XGBoost with transfer (:mod:`tuner.models.xgb_transfer`) and
MetaSchedule's MLP (:mod:`tuner.models.mlp`).

Imports the core and :mod:`tuner.engine`; never the searches or the application.
"""

#: The cost models ``cost_model=`` may name (see :func:`tuner.app.factories.make_cost_model`).
COST_MODELS = ("metatune", "xgb", "xgb-xfer", "mlp", "random")
