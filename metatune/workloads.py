"""Training workloads, reproducible from a seed: the task kinds networks spend time in.

The paper (section 6, Table 2) meta-trains on 47 convolution kernels of six types whose
sizes and channels are drawn at random within these ranges:

=================================  ==========  =============  ==============
operation                          input size  input channels output channels
=================================  ==========  =============  ==============
conv1d, conv1d-transpose           150-600     32-128         32-512
conv2d, conv2d-transpose, winograd 7-224       3-128          16-128
=================================  ==========  =============  ==============

Depthwise convolution (the sixth type) has no row in the extracted table; it takes
MobileNet-like ranges (size 7-112, 16-512 channels). Kernels 1/3/5 and strides 1/2 cover the
layers of the evaluation networks; a FLOP window (0.5-600 MFLOP, winograd 60) keeps one
random schedule's run time measurable. Beyond the paper, dense (matmul, a network's
classifier) and the other tasks a network is compiled into that have schedules to choose
from (max / average pooling, the global mean) are kinds too, so that every task of a
network is in distribution.

Convolutions and dense carry the epilogue a network fuses into them (``bias`` add, or
``bias_relu``), drawn at random. :meth:`Workload.relax_module` builds each workload as a
small Relax graph with its weights bound as constants, so the tuner's own fusion pipeline
turns it into exactly the kind of fused, weight-packable function it extracts from a
network; :meth:`Workload.prim_func` builds the bare operator from TOPI (no epilogue, no
fusion) for quick tests.

``tune.py`` converts 2-D convolutions to NHWC by default (the ops around them follow), so
the 2-D kinds a network then holds in NHWC (:data:`NHWC_KINDS`) are also built in NHWC
(``Workload.layout``; :func:`nhwc_workloads`): the same draws, the data in NHWC and the
weights in OHWI, as ``relax.transform.ConvertLayout`` leaves a network's.

The kinds of transformer encoders and modern CNNs (batch matmul, dense over a sequence's
tokens with GELU, softmax, LayerNorm) are :mod:`metatune.workloads_transformer`'s.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass, replace

from metatune.sampling import rejection_sample

#: Bumped whenever the generator draws different workloads for the same seed.
GENERATOR_VERSION = 2

CONV_KINDS = ("conv1d", "conv1d_transpose", "conv2d", "conv2d_transpose", "winograd",
              "depthwise")
#: Kinds built from TOPI by :meth:`Workload.prim_func` (an operator with one weight).
OPERATOR_KINDS = (*CONV_KINDS, "dense")
#: Kinds without weights: what a network's pooling and reductions compile to. (A network's
#: concatenations and reshapes are left out: their design space holds one schedule.)
OTHER_KINDS = ("max_pool2d", "avg_pool2d", "mean")
KINDS = (*OPERATOR_KINDS, *OTHER_KINDS)
#: Kinds that a network tuned in NHWC holds in NHWC: 2-D convolutions (converted) and the
#: pooling and reductions that follow them. (TVM's winograd compute and the transposed
#: convolutions stay NCHW; 1-D and dense have no channel layout to choose.)
NHWC_KINDS = ("conv2d", "depthwise", "max_pool2d", "avg_pool2d", "mean")
LAYOUTS = ("NCHW", "NHWC")
EPILOGUES = ("", "bias", "bias_relu")

MIN_FLOPS = 0.5e6
MAX_FLOPS = 600e6
MAX_ELEMENTS = 8 * 2**20  # input elements of a pooling or mean workload

#: (size range, input channel range, output channel range) per kind family (Table 2).
_RANGES_1D = ((150, 600), (32, 128), (32, 512))
_RANGES_2D = ((7, 224), (3, 128), (16, 128))
_RANGES_DEPTHWISE = ((7, 112), (16, 512), None)
_RANGES_POOL = ((7, 112), (16, 512), None)


@dataclass(frozen=True)
class Workload:
    """One operator instance (batch 1, float32, NCHW / NCW, or NHWC).

    Attributes:
        kind: One of :data:`KINDS`.
        c_in: Input channels (dense: reduction size K).
        size: Spatial size (H = W for 2-D, W for 1-D; dense: rows M).
        c_out: Output channels (dense: N; depthwise, pooling, mean: equals ``c_in``).
        kernel: Kernel or pooling window size (dense, mean: 1).
        stride: Stride (dense, mean: 1).
        epilogue: What is fused after a convolution or dense: ``""``, ``"bias"`` or
            ``"bias_relu"`` (other kinds: ``""``).
        layout: ``NCHW`` or, for :data:`NHWC_KINDS`, ``NHWC`` (data NHWC, weights OHWI).
    """

    kind: str
    c_in: int
    size: int
    c_out: int
    kernel: int = 1
    stride: int = 1
    epilogue: str = ""
    layout: str = "NCHW"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS or (self.layout == "NHWC" and self.kind not in NHWC_KINDS):
            raise ValueError(f"{self.kind} in layout {self.layout!r}: NCHW for every kind, "
                             f"NHWC for {', '.join(NHWC_KINDS)}")

    @property
    def name(self) -> str:
        """Stable, readable name that identifies the workload (``_nhwc`` ends an NHWC one)."""
        tail = (f"_{self.epilogue}" if self.epilogue else "") + (
            "_nhwc" if self.layout == "NHWC" else "")
        if self.kind == "dense":
            return f"dense_m{self.size}_k{self.c_in}_n{self.c_out}{tail}"
        if self.kind == "mean":
            return f"mean_c{self.c_in}_h{self.size}{tail}"
        return (f"{self.kind}_c{self.c_in}_h{self.size}_o{self.c_out}"
                f"_k{self.kernel}_s{self.stride}{tail}")

    @property
    def padding(self) -> int:
        """Same-style padding for convolutions (``kernel // 2``); pooling is unpadded."""
        return 0 if self.kind in OTHER_KINDS else self.kernel // 2

    @property
    def transpose_padding(self) -> int:
        """Padding of a transposed convolution."""
        return max(0, (self.kernel - self.stride + 1) // 2)

    def out_size(self) -> int:
        """Spatial output size (dense: rows M)."""
        k, s, n = self.kernel, self.stride, self.size
        if self.kind.endswith("transpose"):
            return (n - 1) * s - 2 * self.transpose_padding + k
        if self.kind == "dense":
            return n
        if self.kind == "mean":
            return 1
        return (n + 2 * self.padding - k) // s + 1

    def flops(self) -> float:
        """Multiply-adds x 2 of the direct algorithm (winograd counted as direct); pooling
        and mean: one operation per input element read."""
        k, c, o, out = self.kernel, self.c_in, self.c_out, self.out_size()
        if self.kind == "dense":
            return 2.0 * self.size * c * o
        if self.kind == "conv1d":
            return 2.0 * c * o * k * out
        if self.kind == "conv1d_transpose":
            return 2.0 * c * o * k * self.size
        if self.kind == "conv2d_transpose":
            return 2.0 * c * o * k * k * self.size * self.size
        if self.kind == "depthwise":
            return 2.0 * c * k * k * out * out
        if self.kind in ("max_pool2d", "avg_pool2d"):
            return float(c * k * k * out * out)
        if self.kind == "mean":
            return float(c * self.size * self.size)
        return 2.0 * c * o * k * k * out * out

    def input_elements(self) -> int:
        """Elements of the (first) input tensor."""
        if self.kind == "dense":
            return self.size * self.c_in
        if self.kind.startswith("conv1d"):
            return self.c_in * self.size
        return self.c_in * self.size * self.size

    def to_dict(self) -> dict:
        """Plain dict (for JSON), name included."""
        return {**asdict(self), "name": self.name}

    def prim_func(self):
        """The bare operator as a TIR ``PrimFunc`` from TOPI (no epilogue, no fusion).

        Only for :data:`OPERATOR_KINDS`; the dataset measures :meth:`relax_module`.

        Raises:
            ValueError: The kind has no bare-operator form.
        """
        from tvm import te, topi

        if self.kind not in OPERATOR_KINDS or self.layout != "NCHW":
            raise ValueError(f"{self.kind} ({self.layout}): prim_func() builds "
                             f"{', '.join(OPERATOR_KINDS)} in NCHW; use relax_module() for "
                             "the other kinds and layouts")
        f32 = "float32"
        c, n, o, k, s, p = self.c_in, self.size, self.c_out, self.kernel, self.stride, self.padding
        pad = self.transpose_padding
        if self.kind == "dense":
            a = te.placeholder((n, c), f32, "A")
            w = te.placeholder((o, c), f32, "W")
            args = [a, w, topi.nn.dense(a, w)]
        elif self.kind == "conv1d":
            x = te.placeholder((1, c, n), f32, "data")
            w = te.placeholder((o, c, k), f32, "weight")
            args = [x, w, topi.nn.conv1d_ncw(x, w, s, p, 1)]
        elif self.kind == "conv1d_transpose":
            x = te.placeholder((1, c, n), f32, "data")
            w = te.placeholder((c, o, k), f32, "weight")
            args = [x, w, topi.nn.conv1d_transpose_ncw(x, w, s, pad, f32, 0)]
        elif self.kind == "conv2d_transpose":
            x = te.placeholder((1, c, n, n), f32, "data")
            w = te.placeholder((c, o, k, k), f32, "weight")
            args = [x, w, topi.nn.conv2d_transpose_nchw(x, w, (s, s), (pad, pad), f32, (0, 0))]
        else:
            x = te.placeholder((1, c, n, n), f32, "data")
            if self.kind == "depthwise":
                w = te.placeholder((c, 1, k, k), f32, "weight")
                out = topi.nn.depthwise_conv2d_nchw(x, w, (s, s), (p, p), (1, 1), f32)
            elif self.kind == "winograd":
                w = te.placeholder((o, c, k, k), f32, "weight")
                out = topi.nn.conv2d_winograd_nchw(x, w, (1, 1), (p, p), (1, 1), f32)
            else:
                w = te.placeholder((o, c, k, k), f32, "weight")
                out = topi.nn.conv2d_nchw(x, w, (s, s), (p, p), (1, 1), f32)
            args = [x, w, out]
        return te.create_prim_func(args).with_attr("global_symbol", self.name)

    def relax_module(self):
        """The workload as a Relax graph, its weights bound as constants, not yet legalized.

        Run the tuner's fusion pipeline on it (``tuner.engine.tasks.extract_tasks``) to get
        the fused function a network would contain: operator, epilogue and layout-free
        weights alike.

        Returns:
            A ``tvm.IRModule`` whose ``main`` takes the input tensor(s).
        """
        import numpy as np
        from tvm import relax

        f32 = "float32"
        seed = int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:4], "little")
        rng = np.random.default_rng(seed)

        def const(*shape: int):
            return relax.const((0.1 * rng.standard_normal(shape)).astype(f32))

        c, n, o = self.c_in, self.size, self.c_out
        nhwc = self.layout == "NHWC"
        shape = {"dense": (n, c)}.get(self.kind, (1, c, n) if self.kind.startswith("conv1d")
                                      else (1, n, n, c) if nhwc else (1, c, n, n))
        x = relax.Var("x", relax.TensorType(shape, f32))
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                out = bb.emit(self._relax_op(bb, x, const))
                if self.epilogue:
                    bias = (const(o) if self.kind == "dense" else
                            const(1, o, 1) if self.kind.startswith("conv1d") else
                            const(1, 1, 1, o) if nhwc else const(1, o, 1, 1))
                    out = bb.emit(relax.op.add(out, bias))
                if self.epilogue == "bias_relu":
                    out = bb.emit(relax.op.nn.relu(out))
                result = bb.emit_output(out)
            bb.emit_func_output(result)
        return bb.get()

    def _relax_op(self, bb, x, const):
        """The workload's main operator on the input ``x`` (a Relax expression)."""
        from tvm import relax, topi

        nn = relax.op.nn
        c, o, k, s, p = self.c_in, self.c_out, self.kernel, self.stride, self.padding
        pad = self.transpose_padding
        if self.layout == "NHWC":  # data NHWC, weights OHWI: as ConvertLayout leaves them
            conv = {"data_layout": "NHWC", "kernel_layout": "OHWI"}
            if self.kind == "conv2d":
                return nn.conv2d(x, const(o, k, k, c), (s, s), (p, p), **conv)
            if self.kind == "depthwise":
                return nn.conv2d(x, const(c, k, k, 1), (s, s), (p, p), groups=c, **conv)
            if self.kind == "max_pool2d":
                return nn.max_pool2d(x, (k, k), (s, s), layout="NHWC")
            if self.kind == "avg_pool2d":
                return nn.avg_pool2d(x, (k, k), (s, s), layout="NHWC")
            return relax.op.mean(x, axis=[1, 2], keepdims=True)
        if self.kind == "dense":
            return relax.op.linear(x, const(o, c))
        if self.kind == "conv1d":
            return nn.conv1d(x, const(o, c, k), s, p)
        if self.kind == "conv1d_transpose":
            return nn.conv1d_transpose(x, const(c, o, k), s, pad)
        if self.kind == "conv2d":
            return nn.conv2d(x, const(o, c, k, k), (s, s), (p, p))
        if self.kind == "conv2d_transpose":
            return nn.conv2d_transpose(x, const(c, o, k, k), (s, s), (pad, pad))
        if self.kind == "depthwise":
            return nn.conv2d(x, const(c, 1, k, k), (s, s), (p, p), groups=c)
        if self.kind == "winograd":  # no Relax operator: TOPI's compute as a call_tir
            return bb.emit_te(topi.nn.conv2d_winograd_nchw, x, const(o, c, k, k), (1, 1),
                              (p, p), (1, 1), "float32", primfunc_name_hint="winograd")
        if self.kind == "max_pool2d":
            return nn.max_pool2d(x, (k, k), (s, s))
        if self.kind == "avg_pool2d":
            return nn.avg_pool2d(x, (k, k), (s, s))
        return relax.op.mean(x, axis=[2, 3], keepdims=True)


def _channels(rng: random.Random, lo: int, hi: int) -> int:
    """A channel count in ``[lo, hi]``: a multiple of 8, or 3 (an image) where 3 is allowed."""
    if lo <= 3 and rng.random() < 0.15:
        return 3
    return 8 * rng.randint(max(1, -(-lo // 8)), hi // 8)


def sample_workload(kind: str, rng: random.Random) -> Workload:
    """Draw one workload of ``kind`` within its ranges (rejection on FLOPs and size).

    Args:
        kind: One of :data:`KINDS`.
        rng: The random generator (drives reproducibility).

    Raises:
        ValueError: ``kind`` is unknown.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown workload kind {kind!r}: choose one of {', '.join(KINDS)}")
    # TOPI's winograd transforms the kernel in every run: 10x slower to measure at random
    cap = MAX_FLOPS / 10 if kind == "winograd" else MAX_FLOPS

    def accept(wl: Workload) -> bool:
        if kind in OPERATOR_KINDS:
            return MIN_FLOPS <= wl.flops() <= cap and wl.out_size() > 0
        return wl.input_elements() <= MAX_ELEMENTS and wl.out_size() > 0

    return rejection_sample(lambda: _draw(kind, rng), accept,
                            f"could not draw a {kind} workload within the FLOP range")


def _draw(kind: str, rng: random.Random) -> Workload:
    # winograd is TOPI's compute, not a Relax operator: an epilogue would not fuse into it
    epilogue = "" if kind == "winograd" else rng.choices(EPILOGUES, weights=(1, 3, 6))[0]
    if kind == "dense":
        m = rng.choice((1, 1, 1, 4, 16))  # networks run at batch 1
        return Workload("dense", 8 * rng.randint(32, 1152), m, rng.randint(10, 4096),
                        epilogue=epilogue)
    if kind in ("max_pool2d", "avg_pool2d"):
        (lo, hi), (clo, chi), _ = _RANGES_POOL
        c = _channels(rng, clo, chi)
        return Workload(kind, c, rng.randint(lo, hi), c, rng.choice((2, 3)), rng.choice((1, 2)))
    if kind == "mean":
        c = _channels(rng, 256, 2048)
        return Workload("mean", c, rng.randint(7, 14), c)
    sizes, c_ins, c_outs = (_RANGES_1D if kind.startswith("conv1d") else
                            _RANGES_DEPTHWISE if kind == "depthwise" else _RANGES_2D)
    size = rng.randint(*sizes)
    c_in = _channels(rng, *c_ins)
    c_out = c_in if kind == "depthwise" else _channels(rng, *c_outs)
    kernel = 3 if kind == "winograd" else rng.choice((3, 5) if kind == "depthwise" else (1, 3, 5))
    stride = 1 if kind == "winograd" else rng.choice((1, 2))
    return Workload(kind, c_in, size, c_out, kernel, stride, epilogue)


def training_workloads(per_kind: int = 14, seed: int = 0,
                       other_per_kind: int = 4) -> list[Workload]:
    """The training set, interleaved kind by kind (so any prefix covers every kind).

    Args:
        per_kind: Workloads per convolution kind and dense (:data:`OPERATOR_KINDS`).
        seed: Random seed; the same seed gives the same list.
        other_per_kind: Workloads per pooling or mean kind (:data:`OTHER_KINDS`).

    Returns:
        ``7 * per_kind + 3 * other_per_kind`` distinct workloads: the first of every kind,
        then the second of every kind, and so on.
    """
    rng = random.Random(seed)
    by_kind: dict[str, list[Workload]] = {}
    for kind in KINDS:
        wanted = per_kind if kind in OPERATOR_KINDS else other_per_kind
        seen: dict[str, Workload] = {}
        while len(seen) < wanted:
            wl = sample_workload(kind, rng)
            seen.setdefault(wl.name, wl)
        by_kind[kind] = list(seen.values())
    rounds = max(len(v) for v in by_kind.values())
    return [ws[i] for i in range(rounds) for ws in by_kind.values() if i < len(ws)]


def nhwc_workloads(per_kind: int = 14, seed: int = 0, other_per_kind: int = 4) -> list[Workload]:
    """The training workloads of :data:`NHWC_KINDS` (same arguments, same draws, same
    interleaved order as :func:`training_workloads`), built in NHWC."""
    return [replace(wl, layout="NHWC")
            for wl in training_workloads(per_kind, seed, other_per_kind)
            if wl.kind in NHWC_KINDS]
