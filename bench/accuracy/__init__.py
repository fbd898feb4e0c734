"""Cost-model accuracy on held-out workloads after adapting on k measured samples, behind
``python -m bench.model_accuracy``.

For every held-out workload (the convolutions of the four networks, never trained on) and
seed, a fixed query set of ``query`` measured candidates is drawn, and a support set of k
other measured candidates plays the part of the measurements a tuner would have made. Each
method fits on the support set and scores the query set (:mod:`bench.accuracy.methods`):

- MetaTune checkpoints (``metatune-super``, ``metatune-plain``, ablation variants): each
  adapted on the support set by its :class:`metatune.maml.InnerLoop`, exactly as the tuner
  fine-tunes it online;
- ``NAME+gp``: a checkpoint followed by the batch BO search's GP, as the tuner ranks;
- an ensemble: the mean of several methods' scores;
- ``xgb``: MetaSchedule's ``XGBModel`` trained from scratch on the support set (at k = 0 it
  has no data and, like MetaSchedule, scores at random);
- ``xgb-Xfer``: :class:`tuner.models.xgb_transfer.XferXGBModel`, pre-trained on the training
  split and refit on the support set (at k = 0 the pre-trained model alone).

Targets are what a tuner can know: throughput relative to the best *support* candidate
(``best_support / seconds``), or to the workload's best when k = 0. Metrics
(:mod:`metatune.metrics`): MSE, MSE(D) (top 25 % of the query by measured throughput),
pairwise ranking accuracy and top-5 recall.

Modules: the scored workloads (:mod:`~bench.accuracy.workloads`), which workloads a
checkpoint may be scored on (:mod:`~bench.accuracy.checkpoints`), the methods
(:mod:`~bench.accuracy.methods`), scoring and aggregation (:mod:`~bench.accuracy.scoring`)
and the page (:mod:`~bench.accuracy.page`).
"""
