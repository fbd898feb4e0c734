"""MetaTune core: meta-learned cost model for tensor-program auto-tuning.

Plain PyTorch / PyG code lives here (graph encoding, GCN model, MAML adaptation,
dataset records, workloads). Everything that drives MetaSchedule lives in
:mod:`tuner`.
"""

import warnings as _warnings

__version__ = "0.1.0"

# PyG 2.8 calls torch.jit.script while it is imported (torch_geometric/nn/pool/select/base.py
# and connect/base.py script ``SelectOutput`` and ``ConnectOutput``), and torch 2.9+ warns that
# torch.jit.script is deprecated: two lines before every message of every entry point, about
# code MetaTune never calls (it scripts nothing itself). Only that warning, raised from torch's
# jit module, is silenced; every other warning shows as before.
_warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated",
                         category=FutureWarning, module=r"torch\.jit\._script")


def __getattr__(name: str):
    """``metatune.load`` (:func:`metatune.deploy.load`), imported on first use: ``import
    metatune`` loads neither TVM nor the deployment code."""
    if name == "load":
        from metatune.deploy import load

        return load
    raise AttributeError(f"module 'metatune' has no attribute {name!r}")
