"""The AVX-512 BF16 dot product (``vdpbf16ps``) as a tensor intrinsic MetaSchedule can use.

TVM 0.27 has no bf16 tensor intrinsic for x86 (``tvm.s_tir.tensor_intrin.x86`` holds the
int8 VNNI ones only), and its LLVM lowering never emits ``vdpbf16ps`` on its own: the TIR
passes ``BF16ComputeLegalize`` and ``BF16StorageLegalize`` turn every bf16 value into f32
arithmetic on ``uint16`` storage before LLVM sees it, so a bf16 convolution is compiled to
zero-extend, shift and f32 FMA (``experiments/precision_probe.py``). Calling
``llvm.x86.avx512bf16.dpbf16ps.512`` from TIR directly fails LLVM's verifier, since the
intrinsic takes ``<32 x bfloat>`` and TIR can only hand it ``<32 x i16>``. Here the
intrinsic's body calls a three-line LLVM IR function, linked in with TVM's
``pragma_import_llvm`` and always inlined, that bitcasts ``i16`` to ``bfloat`` and calls
the instruction.

The intrinsic, :data:`INTRIN`: ``C[i] += A[k] * B[i, k]`` over ``i < 16, k < 2`` with ``A``
and ``B`` bf16 and ``C`` f32: sixteen output channels, two reduction elements, one
instruction. ``B`` must be stored as ``[..., 16, 2]`` (see :mod:`tuner.engine.bf16_ops`).
``A`` holds bf16 bits as ``uint16``, made and read with integer arithmetic
(:func:`tuner.engine.bf16_ops.bf16_bits`): it is the kernel's own buffer of rounded
inputs, and ``BF16ComputeLegalize`` stores a function's own bf16 buffers as f32, whose
loads the instruction cannot take (``Invalid bitcast <2 x float> to i32``), nor can a
bf16 value be reinterpreted as bits there (``Invalid bitcast float to i16``).

The schedule rule, :data:`RULE`: the bf16 compute blocks of :mod:`tuner.engine.bf16_ops`
carry the annotation ``schedule_rule = RULE``; MetaSchedule's ``ApplyCustomRule`` then
calls :func:`_apply_rule`, which tiles the block with ``MultiLevelTilingWithIntrin``
around :data:`INTRIN` (the rule TVM uses for VNNI) and leaves the annotation, so the
default tiling does not tile the block again. The annotation is in the task's module,
so every design space of the task (tuning, zero-shot picks, schedule transfer) uses it.
"""

from __future__ import annotations

import functools

#: Name of the tensor intrinsic.
INTRIN = "metatune_dot_16x2_bf16"
#: Value of the ``schedule_rule`` annotation that asks for :func:`_apply_rule`.
RULE = "metatune.bf16_dot"
#: Value of the ``schedule_rule`` annotation of a block that rounds a kernel's input to
#: bf16: :func:`_keep_at_root` (computed whole, before the reduction).
ROUND_RULE = "metatune.bf16_round"
#: Output channels (lanes of f32) and reduction elements of one instruction.
LANES, PAIR = 16, 2

#: The LLVM function the intrinsic's body calls: ``i16`` vectors bitcast to ``bfloat``.
_LLVM_IR = """
define <16 x float> @metatune_dpbf16ps(<16 x float> %c, <32 x i16> %a, <32 x i16> %b) {
  %ab = bitcast <32 x i16> %a to <32 x bfloat>
  %bb = bitcast <32 x i16> %b to <32 x bfloat>
  %r = call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(
      <16 x float> %c, <32 x bfloat> %ab, <32 x bfloat> %bb)
  ret <16 x float> %r
}
declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>, <32 x bfloat>)
"""


def _prim_funcs():
    """The intrinsic's description and implementation (TVMScript)."""
    from tvm.script import tirx as T

    llvm_ir = _LLVM_IR

    @T.prim_func(s_tir=True)
    def desc(A: T.Buffer((2,), "uint16", offset_factor=1),
             B: T.Buffer((16, 2), "bfloat16", offset_factor=1),
             C: T.Buffer((16,), "float32", offset_factor=1)) -> None:
        with T.sblock("root"):
            T.reads(C[0:16], A[0:2], B[0:16, 0:2])
            T.writes(C[0:16])
            for i in T.serial(0, 16):
                for k in T.serial(0, 2):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        C[vi] = C[vi] + T.reinterpret(
                            "float32", T.shift_left(T.Cast("uint32", A[vk]), T.uint32(16))
                        ) * T.cast(B[vi, vk], "float32")

    @T.prim_func(s_tir=True)
    def impl(A: T.Buffer((2,), "uint16", offset_factor=1),
             B: T.Buffer((16, 2), "bfloat16", offset_factor=1),
             C: T.Buffer((16,), "float32", offset_factor=1)) -> None:
        with T.sblock("root"):
            T.reads(C[0:16], A[0:2], B[0:16, 0:2])
            T.writes(C[0:16])
            with T.attr(0, "pragma_import_llvm", llvm_ir):
                a_pair = T.reinterpret("int32", A.vload([0], "uint16x2"))
                a = T.reinterpret("int16x32", T.broadcast(a_pair, 16))
                b = T.reinterpret("int16x32", B.vload([0, 0], dtype="bfloat16x32"))
                C[T.ramp(T.int32(0), 1, 16)] = T.call_pure_extern(
                    "float32x16", "metatune_dpbf16ps", C.vload([0], dtype="float32x16"), a, b)

    return desc, impl


@functools.cache
def _tiling_rule():
    """MetaSchedule's x86 VNNI tiling (``ScheduleRule::DefaultX86``'s parameters) around
    :data:`INTRIN`, initialized once."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    rule = ms.schedule_rule.MultiLevelTilingWithIntrin(
        INTRIN, structure="SSRSRS", tile_binds=None, max_innermost_factor=64,
        vector_load_lens=None, reuse_read=None,
        reuse_write=ms.schedule_rule.ReuseType(req="may", levels=[1, 2], scope="global"))
    context = ms.TuneContext(target=tvm.target.Target("llvm"))
    rule._initialize_with_tune_context(context)
    return rule


#: Loop annotation that keeps ``RewriteParallelVectorizeUnroll`` from vectorizing the
#: loops around the intrinsic (it stops at the first annotated loop).
KEEP_SERIAL = "metatune.keep_serial"


def _apply_rule(sch, block):
    """``ApplyCustomRule``'s call for a block annotated :data:`RULE`: its tilings around
    :data:`INTRIN` (the annotation stays, so no other tiling rule touches the block).

    The innermost loop around the tensorized block is annotated :data:`KEEP_SERIAL`:
    MetaSchedule's postprocessor would otherwise vectorize the spatial loops around the
    intrinsic whenever their extents fit, and the intrinsic's own vectors cannot be
    vectorized again (``Cannot broadcast lanes=16 to 32``): 10 of 16 random schedules of
    a bf16 matmul failed to build so, as do TVM's own VNNI schedules
    (``experiments/precision_probe.py``).
    """
    name = sch.get(block).name_hint
    out = []
    for tiled in _tiling_rule().apply(sch, block):
        try:
            outer = tiled.get_sblock(f"{name}_o")
        except Exception:  # no intrinsic block (a tiling without it): nothing to keep
            out.append(tiled)
            continue
        loops = tiled.get_loops(outer)
        if loops:
            tiled.annotate(loops[-1], KEEP_SERIAL, 1)
        out.append(tiled)
    return out


def _keep_at_root(sch, block):
    """``ApplyCustomRule``'s call for a block annotated :data:`ROUND_RULE`: the schedule
    as it is, the annotation kept, so that no rule moves the block. MetaSchedule's
    ``RandomComputeLocation`` would otherwise sample its location among the reduction's
    loops or inline it, and an inlined rounding makes the reduction's input an
    expression the intrinsic does not match: 5 of the 6 networks' slowest tasks so tuned
    were never tensorized. At the root, the postprocessor parallelizes and vectorizes it.
    """
    return [sch]


@functools.cache
def register() -> None:
    """Register :data:`INTRIN` and the rule :data:`RULE` in this process (idempotent).

    Extraction, tuning and the final compile must run it before they generate design
    spaces or replay a tuned trace; builder workers need nothing (they build modules
    already tensorized).
    """
    import tvm_ffi
    from tvm.s_tir import TensorIntrin

    from tuner.engine.custom_rules import TARGET_KEYS

    if TensorIntrin.get(INTRIN, allow_missing=True) is None:
        TensorIntrin.register(INTRIN, *_prim_funcs())
    for key in TARGET_KEYS:
        for rule, func in ((RULE, _apply_rule), (ROUND_RULE, _keep_at_root)):
            name = f"s_tir.meta_schedule.{key}.{rule}"
            if tvm_ffi.get_global_func(name, allow_missing=True) is None:
                tvm_ffi.register_global_func(name, func)
