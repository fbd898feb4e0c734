"""The maintained benchmarks, run from the repository root as ``python -m bench.<name>``:

- ``tuning_speed`` (with ``tuning_speed_timing``, ``tuning_speed_page``,
  ``tuning_speed_records``): the default against xgb on whole networks along a budget
  ladder, every rung's build timed side by side;
- ``attribution`` (a package): each part of the default switched on in xgb and off in the
  default, on held-out tasks;
- ``pytorch_parity`` (with :mod:`bench.parity_convs`): tuned networks against PyTorch eager
  and ``torch.compile``, conv by conv;
- ``runtimes`` (with :mod:`bench.runtime_timers`): the tuned build beside PyTorch eager,
  ``torch.compile``, ONNX Runtime and OpenVINO, same threads, timed side by side;
- ``compare_frameworks`` (with :mod:`bench.frameworks` and ``retime_networks``): the tuning
  frameworks side by side on held-out convolutions and networks;
- ``model_accuracy`` (with :mod:`bench.accuracy`): cost-model accuracy after k samples;
- ``trial_overhead``: wall time per tuning trial against MetaSchedule's defaults;
- ``rpc_throughput`` (with :mod:`bench.rpc_farm`): measurement through an RPC tracker;
- ``faults``: every fault of issue 16 injected into real ``tune.py`` runs;
- ``memory_reuse``: a second network tuned after a first that shares its shapes, with the
  tuning memory and without.

:mod:`bench.common` holds what they share. One-off studies live in ``experiments/``.
"""
