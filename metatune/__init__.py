"""MetaTune core: meta-learned cost model for tensor-program auto-tuning.

Plain PyTorch / PyG code lives here (graph encoding, GCN model, MAML adaptation,
dataset records, workloads). Everything that drives MetaSchedule lives in
:mod:`tuner`.
"""

__version__ = "0.1.0"
