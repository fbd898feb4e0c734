"""Transformer workloads, reproducible from a seed: the task kinds encoders and modern CNNs
spend time in beyond convolutions (the ``train-transformer`` split).

=============  =====================================  ======================================
kind           the function                           shapes drawn (BERT-tiny to -large,
                                                      ViT, ConvNeXt)
=============  =====================================  ======================================
batch_matmul   ``[B, M, K] x [B, K, N]``, both        B = heads 2-16; attention scores
               inputs (attention)                     (M = N = sequence, K = head size) or
                                                      context (M = K = sequence, N = head
                                                      size); sequence 32-512, head 32-128
seq_dense      ``[M, K] x [N, K]^T`` + bias, GELU     M = tokens (a sequence, 32-512, or an
               or not (``bias`` / ``bias_gelu``)      image's H x W, 49-3136); K, N a hidden
                                                      size 40-1024 and 4x it (feed-forward)
softmax        over the last axis of                  heads 2-16, sequence 32-512
               ``[1, heads, S, S]``
layer_norm     over the last axis of ``[1, S, C]``    tokens and hidden as above; images
               (tokens) or ``[1, H, W, C]``           7-56 square, C as ConvNeXt's 40-768
               (channels last), with gamma and beta
=============  =====================================  ======================================

As :mod:`metatune.workloads`' kinds, each is built by :meth:`SequenceWorkload.relax_module`
as a small Relax graph with its weights bound as constants, which the tuner's own fusion
pipeline turns into one fused, weight-packable function like the one it extracts from a
network. A FLOP window (0.5-600 MFLOP) keeps one random schedule of a matmul measurable; an
element cap (8 Mi input elements) does for the softmax and LayerNorm.

The dense shapes carry sequences of tokens, which the classic ``dense`` kind (a classifier at
batch 1-16) does not: a BERT's and a ConvNeXt's heaviest tasks are these. ``torch.export``
leaves a reshape between a linear layer and its GELU; the tuner's fusion moves the GELU above
it (:mod:`tuner.engine.activation_fusion`, since 2026-12-07), so networks imported from
PyTorch now hold ``bias_gelu``, the fused form other importers (ONNX) give. The GELU in the
splits collected before then is TVM's ``erff`` call per element, not today's polynomial
(:mod:`tuner.engine.fast_math`).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass

from metatune.sampling import rejection_sample

#: Bumped whenever the generator draws different workloads for the same seed.
TRANSFORMER_GENERATOR_VERSION = 1
TRANSFORMER_KINDS = ("batch_matmul", "seq_dense", "softmax", "layer_norm")
SEQ_DENSE_EPILOGUES = ("bias", "bias_gelu")

MIN_FLOPS = 0.5e6
MAX_FLOPS = 600e6
MIN_ELEMENTS = 2**14
MAX_ELEMENTS = 8 * 2**20

SEQUENCES = (32, 64, 128, 196, 256, 384, 512)  # 196: a ViT's 14 x 14 patches
IMAGE_SIZES = (7, 14, 28, 56)  # ConvNeXt's stages at 224 x 224
HEADS = (2, 4, 8, 12, 16)
HEAD_SIZES = (32, 64, 128)
HIDDEN = (128, 256, 384, 512, 768, 1024)
CONVNEXT_CHANNELS = (40, 80, 96, 160, 192, 320, 384, 768)


@dataclass(frozen=True)
class SequenceWorkload:
    """One transformer operator instance (float32).

    Attributes:
        kind: One of :data:`TRANSFORMER_KINDS`.
        batch: batch_matmul: the batch (heads); softmax: the heads; layer_norm: an image's
            height (1: tokens, ``[1, S, C]``); seq_dense: 1.
        rows: M: the rows (sequence, tokens; layer_norm on an image: its width).
        inner: K: the reduction of a matmul; softmax, layer_norm: the last axis.
        cols: N: a matmul's output columns; softmax, layer_norm: equal to ``inner``.
        epilogue: seq_dense: ``bias`` or ``bias_gelu``; other kinds ``""``.
    """

    kind: str
    batch: int
    rows: int
    inner: int
    cols: int
    epilogue: str = ""

    def __post_init__(self) -> None:
        if self.kind not in TRANSFORMER_KINDS:
            raise ValueError(f"unknown transformer workload kind {self.kind!r}: choose one of "
                             f"{', '.join(TRANSFORMER_KINDS)}")
        if (self.kind == "seq_dense") != (self.epilogue in SEQ_DENSE_EPILOGUES) or (
                self.kind != "seq_dense" and self.epilogue):
            raise ValueError(f"{self.kind} with epilogue {self.epilogue!r}: seq_dense takes "
                             f"{' or '.join(SEQ_DENSE_EPILOGUES)}, the other kinds none")

    @property
    def name(self) -> str:
        """Stable, readable name that identifies the workload."""
        tail = f"_{self.epilogue}" if self.epilogue else ""
        if self.kind == "batch_matmul":
            return f"batch_matmul_b{self.batch}_m{self.rows}_k{self.inner}_n{self.cols}"
        if self.kind == "seq_dense":
            return f"seq_dense_m{self.rows}_k{self.inner}_n{self.cols}{tail}"
        if self.kind == "softmax":
            return f"softmax_h{self.batch}_s{self.rows}_n{self.inner}"
        return f"layer_norm_b{self.batch}_m{self.rows}_c{self.inner}"

    def input_shapes(self) -> list[tuple[int, ...]]:
        """The shapes of the function's inputs (the weights are constants)."""
        b, m, k, n = self.batch, self.rows, self.inner, self.cols
        if self.kind == "batch_matmul":
            return [(b, m, k), (b, k, n)]
        if self.kind == "seq_dense":
            return [(m, k)]
        if self.kind == "softmax":
            return [(1, b, m, k)]
        return [(1, m, k)] if b == 1 else [(1, b, m, k)]

    def input_elements(self) -> int:
        """Elements of the first input tensor."""
        shape = self.input_shapes()[0]
        out = 1
        for d in shape:
            out *= d
        return out

    def flops(self) -> float:
        """Multiply-adds x 2 of a matmul (the epilogue not counted); softmax and LayerNorm:
        one operation per input element read, as pooling is counted."""
        if self.kind in ("batch_matmul", "seq_dense"):
            return 2.0 * self.batch * self.rows * self.inner * self.cols
        return float(self.input_elements())

    def to_dict(self) -> dict:
        """Plain dict (for JSON), name and generator version included."""
        return {**asdict(self), "name": self.name, "generator": TRANSFORMER_GENERATOR_VERSION}

    def relax_module(self):
        """The workload as a Relax graph, its weights bound as constants, not yet legalized.

        Returns:
            A ``tvm.IRModule`` whose ``main`` takes the input tensor(s).
        """
        import numpy as np
        from tvm import relax

        f32 = "float32"
        seed = int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:4], "little")
        rng = np.random.default_rng(seed)

        def const(*shape: int, mean: float = 0.0):
            return relax.const((mean + 0.1 * rng.standard_normal(shape)).astype(f32))

        params = [relax.Var(f"x{i}", relax.TensorType(s, f32))
                  for i, s in enumerate(self.input_shapes())]
        op = relax.op
        bb = relax.BlockBuilder()
        with bb.function("main", params):
            with bb.dataflow():
                x = params[0]
                if self.kind == "batch_matmul":
                    out = bb.emit(op.matmul(x, params[1]))
                elif self.kind == "seq_dense":
                    out = bb.emit(op.linear(x, const(self.cols, self.inner)))
                    out = bb.emit(op.add(out, const(self.cols)))
                    if self.epilogue == "bias_gelu":
                        out = bb.emit(op.nn.gelu(out))
                elif self.kind == "softmax":
                    out = bb.emit(op.nn.softmax(x, axis=-1))
                else:
                    out = bb.emit(op.nn.layer_norm(x, const(self.inner, mean=1.0),
                                                   const(self.inner), axes=[-1], epsilon=1e-6))
                result = bb.emit_output(out)
            bb.emit_func_output(result)
        return bb.get()


def _draw(kind: str, rng: random.Random) -> SequenceWorkload:
    if kind == "batch_matmul":
        heads, seq, head = rng.choice(HEADS), rng.choice(SEQUENCES), rng.choice(HEAD_SIZES)
        if rng.random() < 0.5:  # scores: q k^T
            return SequenceWorkload(kind, heads, seq, head, seq)
        return SequenceWorkload(kind, heads, seq, seq, head)  # context: p v
    if kind == "seq_dense":
        image = rng.random() < 0.3
        tokens = rng.choice(IMAGE_SIZES) ** 2 if image else rng.choice(SEQUENCES)
        hidden = rng.choice(CONVNEXT_CHANNELS if image else HIDDEN)
        k, n = rng.choice(((hidden, hidden), (hidden, 4 * hidden), (4 * hidden, hidden)))
        return SequenceWorkload(kind, 1, tokens, k, n, rng.choice(SEQ_DENSE_EPILOGUES))
    if kind == "softmax":
        seq = rng.choice(SEQUENCES)
        return SequenceWorkload(kind, rng.choice(HEADS), seq, seq, seq)
    if rng.random() < 0.4:  # a ConvNeXt's channels-last LayerNorm
        size, c = rng.choice(IMAGE_SIZES), rng.choice(CONVNEXT_CHANNELS)
        return SequenceWorkload(kind, size, size, c, c)
    hidden = rng.choice(HIDDEN)
    return SequenceWorkload(kind, 1, rng.choice(SEQUENCES), hidden, hidden)


def sample_sequence_workload(kind: str, rng: random.Random) -> SequenceWorkload:
    """Draw one workload of ``kind`` within its ranges (rejection on FLOPs or elements).

    Args:
        kind: One of :data:`TRANSFORMER_KINDS`.
        rng: The random generator (drives reproducibility).

    Raises:
        ValueError: ``kind`` is unknown.
    """
    if kind not in TRANSFORMER_KINDS:
        raise ValueError(f"unknown transformer workload kind {kind!r}: choose one of "
                         f"{', '.join(TRANSFORMER_KINDS)}")

    def accept(wl: SequenceWorkload) -> bool:
        if kind in ("batch_matmul", "seq_dense"):
            return MIN_FLOPS <= wl.flops() <= MAX_FLOPS
        return MIN_ELEMENTS <= wl.input_elements() <= MAX_ELEMENTS

    return rejection_sample(lambda: _draw(kind, rng), accept,
                            f"could not draw a {kind} workload within its range")


def transformer_workloads(per_kind: int = 8, seed: int = 0) -> list[SequenceWorkload]:
    """The ``train-transformer`` workloads, interleaved kind by kind (so any prefix covers
    every kind).

    Args:
        per_kind: Workloads per kind of :data:`TRANSFORMER_KINDS`.
        seed: Random seed; the same seed gives the same list.

    Returns:
        ``4 * per_kind`` distinct workloads: the first of every kind, then the second of
        every kind, and so on.
    """
    rng = random.Random(seed)
    by_kind: dict[str, list[SequenceWorkload]] = {}
    for kind in TRANSFORMER_KINDS:
        seen: dict[str, SequenceWorkload] = {}
        for _ in range(100 * per_kind):
            if len(seen) == per_kind:
                break
            wl = sample_sequence_workload(kind, rng)
            seen.setdefault(wl.name, wl)
        else:
            raise ValueError(f"per_kind={per_kind}: {kind} has fewer distinct workloads in "
                             "its ranges; ask for fewer")
        by_kind[kind] = list(seen.values())
    return [ws[i] for i in range(per_kind) for ws in by_kind.values()]
