"""Compile the network (tuned and untuned), check its output, and time it beside PyTorch."""

from __future__ import annotations

import logging
import math
import statistics
import time

import numpy as np

from metatune.errors import CheckFailedError
from tuner.engine.tasks import Lowering, fuse_pipeline
from tuner.engine.timing import Latency, WindowTimer, torch_timer

logger = logging.getLogger(__name__)


def first_output(out) -> np.ndarray:
    """First output of a VM call (a tensor or a tuple of them) as a numpy array."""
    if hasattr(out, "numpy"):
        return out.numpy()
    return first_output(out[0])


class CompiledNetwork:
    """A network compiled by TVM into a Relax VM, ready to run and time.

    Args:
        executable: A ``relax.VMExecutable``.
        device_type: ``"cpu"``, ``"cuda"``, ``"rocm"``.
    """

    def __init__(self, executable, device_type: str) -> None:
        import tvm
        from tvm import relax

        self.device = tvm.device(device_type, 0)
        self.vm = relax.VirtualMachine(executable, self.device)

    def run(self, x: np.ndarray) -> np.ndarray:
        """Run one inference on ``x`` (a float32 array of the input shape)."""
        import tvm

        return first_output(self.vm["main"](tvm.runtime.tensor(x, self.device)))

    def time(self, x: np.ndarray, repeat: int, min_repeat_ms: int) -> Latency:
        """Median latency of ``repeat`` timed repeats, each at least ``min_repeat_ms`` long."""
        runs = self.timer(x)(repeat, min_repeat_ms)
        return Latency(statistics.median(runs), runs)

    def timer(self, x: np.ndarray) -> WindowTimer:
        """A window timer of ``main`` on ``x`` (:mod:`tuner.engine.timing`): the VM's time
        evaluator, each window's calls as many as fill ``min_window_ms``."""
        import tvm

        inp = tvm.runtime.tensor(x, self.device)

        def windows(count: int, min_window_ms: float) -> list[float]:
            timer = self.vm.time_evaluator("main", self.device, number=1, repeat=count,
                                           min_repeat_ms=int(math.ceil(min_window_ms)))
            return [r * 1e3 for r in timer(inp).results]

        return windows

    def profile(self, x: np.ndarray, repeat: int) -> tuple[dict[str, tuple[int, float]], float]:
        """Wall time of every function the VM calls, over ``repeat`` instrumented runs
        (after one warm-up run): kernels, and the VM's built-ins (allocation, reshapes).

        Each call is timed from the VM's instrument hooks, so a call's time includes a few
        microseconds of hook overhead; the runs themselves are slower than :meth:`time`'s.

        Returns:
            ``({symbol: (calls per run, median microseconds per run)}, median ms of an
            instrumented run)``.
        """
        import tvm

        arg = tvm.runtime.tensor(x, self.device)
        self.vm["main"](arg)  # warm-up: first-run allocations are not the network's
        clock = time.perf_counter
        per_run: list[dict[str, list[float]]] = []
        started: list[float] = []

        def instrument(func, symbol, before_run, ret_value, *args) -> int:
            if before_run:
                started.append(clock())
            else:
                per_run[-1].setdefault(str(symbol), []).append(clock() - started.pop())
            return 0  # VMInstrumentReturnKind.NO_OP

        self.vm.set_instrument(instrument)
        totals = []
        try:
            for _ in range(repeat):
                per_run.append({})
                t0 = clock()
                self.vm["main"](arg)
                self.device.sync()
                totals.append((clock() - t0) * 1e3)
        finally:
            self.vm.set_instrument(None)
        out = {}
        for symbol in per_run[0]:
            calls = len(per_run[0][symbol])
            out[symbol] = (calls, statistics.median(sum(run.get(symbol, [])) * 1e6
                                                    for run in per_run))
        return out, statistics.median(totals)


def _lower_passes(target) -> list:
    """Relax's lowering and finalizing passes for ``target`` (an explicit list where
    ``relax.pipeline`` has none registered, as for ``llvm`` in TVM 0.27)."""
    from tvm import relax
    from tvm.relax import pipeline as relax_pipeline

    try:
        return [*relax_pipeline.dataflow_lower_passes(target),
                *relax_pipeline.finalize_passes(target)]
    except (ValueError, AttributeError):
        return [
            relax.transform.RewriteDataflowReshape(),
            relax.transform.ToNonDataflow(),
            relax.transform.RemovePurityChecking(),
            relax.transform.CallTIRRewrite(),
            relax.transform.StaticPlanBlockMemory(),
            relax.transform.LowerAllocTensor(),
            relax.transform.KillAfterLastUse(),
            relax.transform.LowerRuntimeBuiltin(),
            relax.transform.ComputePrimValue(),
            relax.transform.VMShapeLower(),
            relax.transform.AttachGlobalSymbol(),
        ]


def compile_network(relax_mod, target, database, device_type: str,
                    lowering: Lowering = Lowering(), on_fused=None) -> CompiledNetwork:
    """Compile a network with the schedules of ``database`` (:func:`build_network`) and
    load it into a VM on ``device_type``."""
    return CompiledNetwork(build_network(relax_mod, target, database, lowering, on_fused),
                           device_type)


def build_network(relax_mod, target, database, lowering: Lowering = Lowering(),
                  on_fused=None):
    """Build a network with the schedules of ``database``: the ``relax.VMExecutable``
    (``export_library`` writes it; nothing is loaded, so any target builds here).

    The pipeline is MetaSchedule's ``compile_relax`` plus weight pre-packing: the same
    fusion as extraction (:func:`tuner.engine.tasks.fuse_pipeline`), the database's schedules,
    then each schedule's weight-layout rewrite split into its own function and folded
    into the constants, so the packed weights are computed once, at compile time.
    Functions without a schedule keep TVM's default (unscheduled) one on CPUs; on GPUs
    they get DLight's default schedules, as in ``compile_relax``.

    Args:
        relax_mod: The network's Relax module (weights bound).
        target: The ``tvm.target.Target``.
        database: A MetaSchedule database.
        lowering: Weight packing and layout: must be the extraction's.
        on_fused: Called with the fused ``IRModule`` before the schedules are applied
            (its function names are the compiled network's).
    """
    import tvm
    from tvm import relax
    from tvm.relax.transform import MetaScheduleApplyDatabase

    fuse = fuse_pipeline(target, lowering)
    packing = ([relax.transform.SplitLayoutRewritePreproc(), relax.transform.FoldConstant()]
               if lowering.pack_weights else [])
    fallback = []
    if relax.pipeline.BackendDispatcher.is_gpu_target(target):
        from tvm.s_tir import dlight as dl

        fallback = [dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                            dl.gpu.GeneralReduction(), dl.gpu.Fallback())]
    lower = _lower_passes(target)

    @tvm.transform.module_pass(opt_level=3)
    def pipeline(mod: tvm.ir.IRModule, _ctx) -> tvm.ir.IRModule:
        mod = fuse(mod)
        if on_fused is not None:
            on_fused(mod)
        mod = MetaScheduleApplyDatabase(enable_warning=False)(mod)
        return tvm.transform.Sequential([*packing, *fallback, *lower])(mod)

    with target, database, tvm.transform.PassContext(opt_level=3):
        return relax.build(relax_mod, target=target, relax_pipeline=pipeline)


def compile_untuned(relax_mod, target, device_type: str) -> CompiledNetwork:
    """Compile with no tuning records (:func:`build_untuned`) and load it into a VM."""
    return CompiledNetwork(build_untuned(relax_mod, target), device_type)


def build_untuned(relax_mod, target):
    """Build with no tuning records: TVM's default schedules everywhere, the floor (the
    ``relax.VMExecutable``, as :func:`build_network`)."""
    from tvm.s_tir import meta_schedule as ms

    return build_network(relax_mod, target, ms.database.MemoryDatabase(),
                         Lowering(pack_weights=False))


def check_output(actual: np.ndarray, expected: np.ndarray, rtol: float) -> float:
    """Compare outputs; the error is relative to the largest reference magnitude.

    Returns:
        The relative max error.

    Raises:
        CheckFailedError: The relative max error exceeds ``rtol`` or shapes differ.
    """
    if actual.shape != expected.shape:
        raise CheckFailedError(f"output shape {actual.shape} != reference {expected.shape}")
    scale = float(np.max(np.abs(expected))) or 1.0
    err = float(np.max(np.abs(actual - expected))) / scale
    if not err <= rtol:
        raise CheckFailedError(
            f"compiled output differs from the reference: relative max error {err:.2e} > "
            f"{rtol:.0e}; the tuned schedule may be wrong (report it) or raise evaluate.rtol"
        )
    return err


def time_torch(module, x: np.ndarray, repeat: int, num_threads: int,
               compile: bool = False) -> Latency:
    """Median latency of single PyTorch calls on the CPU, ``num_threads`` threads: the
    windows of :func:`tuner.engine.timing.torch_timer` one call long (after its 3 warm-up
    runs, which include compilation).

    Args:
        module: The ``nn.Module`` in eval mode.
        x: The input array.
        repeat: Timed calls.
        num_threads: ``torch.set_num_threads`` value.
        compile: Time ``torch.compile(module)`` (inductor) instead of eager.
    """
    runs = torch_timer(module, x, num_threads, compile=compile)(repeat, 0.0)
    return Latency(statistics.median(runs), runs)
