"""Task extraction: the network's fused TIR functions, as MetaSchedule will tune them."""

from __future__ import annotations

from dataclasses import dataclass

from metatune.errors import ConfigError
from tuner.engine.custom_rules import register_pool_rules
from tuner.engine.intrinsics import load_tensor_intrinsics
from tuner.engine.precision import check_precision, legalize_map, packed_weights_fixed


@dataclass(frozen=True)
class TaskInfo:
    """One tuning task.

    Attributes:
        index: Position in the task list.
        name: MetaSchedule task name (the fused function's name, e.g. ``fused_conv2d_add``).
        flops: Floating-point operations of one call.
        weight: How many times the network calls it.
        extracted: The ``ms.ExtractedTask``.
    """

    index: int
    name: str
    flops: float
    weight: int
    extracted: object

    @property
    def is_conv(self) -> bool:
        """Whether the task is a convolution (the paper's subject)."""
        return "conv" in self.name

    @property
    def arg_shapes(self) -> list[list[int]]:
        """The shapes of the task function's buffers, in argument order (inputs, then the
        output): e.g. a fused conv2d's data, weight (before packing), bias, output. A
        symbolic dimension is given as its name; a scalar argument as ``[]``."""
        def dim(d) -> int | str:
            try:
                return int(d)
            except (TypeError, ValueError):
                return str(d)

        return [[dim(d) for d in getattr(p, "shape", None) or []]
                for p in self.extracted.mod["main"].params]


#: Data layouts a network's convolutions can be converted to before lowering.
LAYOUTS = ("NCHW", "NHWC")


@dataclass(frozen=True)
class Lowering:
    """How a network becomes tasks. Extraction and the final compile must use the same.

    Attributes:
        pack_weights: Mark every weight (a bound constant) of each fused function as a
            layout-free buffer, so that MetaSchedule's ``RewriteLayout`` postprocessor may
            store it in the layout its schedule reads best (packed once at compile time).
        layout: ``NCHW`` (as imported) or ``NHWC``: 2-D convolutions converted to NHWC
            data and OHWI weights (``relax.transform.ConvertLayout``, after
            :func:`~tuner.engine.clip_layout.clip_to_min_max`; then
            :func:`~tuner.engine.permute_fold.fold_permutes` cancels its transposes
            against the network's own); the ops around them follow, and transposes are
            inserted at the network's edges. ``tune.py``
            defaults to NHWC (``TuneConfig.layout``); this default, NCHW, is the
            layout the datasets' workloads are generated and collected in.
        precision: ``fp32``, or ``bf16``: convolutions and dense layers compute on bf16
            inputs (:mod:`tuner.engine.precision`).
    """

    pack_weights: bool = True
    layout: str = "NCHW"
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigError(f"layout={self.layout!r}: choose one of {', '.join(LAYOUTS)}")
        check_precision(self.precision, self.layout, None)


def fuse_pipeline(target, lowering: Lowering = Lowering()):
    """The passes that turn a network into the fused TIR functions MetaSchedule tunes.

    Extraction and the final compile (:func:`tuner.engine.evaluate.compile_network`) both run
    exactly these passes, so the database keys of the tuned functions match. Before
    ``FuseOps``: the NHWC conversion (``lowering.layout``), activations, scales and residual
    adds moved above the reshapes after ``nn.Linear``
    (:func:`~tuner.engine.activation_fusion.activations_before_reshape`), and legalization
    with float32 exp/erf/tanh as vector polynomials (:mod:`tuner.engine.fast_math`).

    Args:
        target: The ``tvm.target.Target``.
        lowering: Weight packing and data layout.
    """
    import tvm
    from tvm import relax
    from tvm.relax import pipeline as relax_pipeline

    from tuner.engine.activation_fusion import activations_before_reshape
    from tuner.engine.clip_layout import clip_to_min_max
    from tuner.engine.permute_fold import fold_permutes

    try:
        dispatch = relax_pipeline.library_dispatch_passes(target)
    except (ValueError, AttributeError):
        dispatch = []
    packing = ([relax.transform.CanonicalizeBindings(),
                relax.transform.AttachAttrLayoutFreeBuffers(),
                *packed_weights_fixed(lowering.precision)] if lowering.pack_weights else [])
    layout = ([clip_to_min_max(),  # ConvertLayout has no rule for clip
               relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "OHWI"]}),
               fold_permutes()]  # its transposes meet the network's own
              if lowering.layout == "NHWC" else [])
    return tvm.transform.Sequential(
        [
            *layout,
            activations_before_reshape(),  # so that they fuse into the matmul before them
            *dispatch,
            relax.transform.LegalizeOps(legalize_map(lowering.precision)),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
            *packing,
        ]
    )


def extract_tasks(relax_mod, target, lowering: Lowering = Lowering()) -> list[TaskInfo]:
    """Extract the tuning tasks of a Relax module.

    Args:
        relax_mod: The network's Relax module (weights bound, not legalized).
        target: The ``tvm.target.Target``.
        lowering: Weight packing and layout (:class:`Lowering`); the final compile must use
            the same.

    Returns:
        The tasks, heaviest (FLOPs x weight) first.
    """
    import tvm
    from tvm.s_tir.meta_schedule.relax_integration import extract_tasks as ms_extract

    load_tensor_intrinsics((target.kind.name,))
    register_pool_rules()  # TVM's pooling names rules TVM never registers
    with target, tvm.transform.PassContext(opt_level=3):
        fused = fuse_pipeline(target, lowering)(relax_mod)
    extracted = ms_extract(fused, target)
    # Heaviest first: the task scheduler visits tasks in order before it allocates by
    # gradient, so a small budget goes to the tasks that dominate the network's latency.
    cost = [(task_flops(t.dispatched[0]), t) for t in extracted]
    cost.sort(key=lambda ft: -ft[0] * int(ft[1].weight))
    return [TaskInfo(i, t.task_name, f, int(t.weight), t) for i, (f, t) in enumerate(cost)]


def task_flops(mod) -> float:
    """FLOPs of one call of a task's ``IRModule`` (0 when TVM cannot count them)."""
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        return float(estimate_tir_flops(mod))
    except Exception:  # TVM cannot count some ops (e.g. data-dependent loops)
        return 0.0


def format_task_table(tasks: list[TaskInfo]) -> str:
    """A plain-text table of tasks: index, name, MFLOP, weight."""
    width = max([len(t.name) for t in tasks] + [4])
    lines = [f"{'#':>3}  {'task':<{width}}  {'MFLOP':>10}  {'weight':>6}"]
    lines.append("-" * len(lines[0]))
    for t in tasks:
        lines.append(f"{t.index:>3}  {t.name:<{width}}  {t.flops / 1e6:>10.2f}  {t.weight:>6}")
    total = sum(t.flops * t.weight for t in tasks)
    lines.append(f"{len(tasks)} tasks, {total / 1e9:.3f} GFLOP per inference")
    return "\n".join(lines)
