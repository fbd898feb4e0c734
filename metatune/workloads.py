"""Convolution (and dense) workloads for the training set, reproducible from a seed.

The paper (section 6, Table 2) meta-trains on 47 kernels of six convolution types with
sizes and channels drawn at random. The extracted text of Table 2 lost its numbers, so
the ranges below are ours, chosen to cover the layers of the four evaluation networks
(spatial 7-112, channels 16-512, kernels 1/3/5, strides 1/2: Figure 4) while keeping one
random schedule's run time measurable (0.5-600 MFLOP). Dense (matmul) is a seventh type.

Each workload builds a TIR ``PrimFunc`` from TOPI/TE with a stable name, e.g.
``conv2d_c64_h56_o64_k3_s1``.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

KINDS = ("conv1d", "conv1d_transpose", "conv2d", "conv2d_transpose", "winograd", "depthwise",
         "dense")
CONV_KINDS = KINDS[:-1]

MIN_FLOPS = 0.5e6
MAX_FLOPS = 600e6
_CHANNELS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
_SPATIAL_2D = (7, 14, 17, 28, 35, 56, 64, 112)
_SPATIAL_1D = (32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class Workload:
    """One operator instance.

    Attributes:
        kind: One of :data:`KINDS`.
        c_in: Input channels (dense: reduction size K).
        size: Spatial size (H = W for 2-D, W for 1-D; dense: rows M).
        c_out: Output channels (dense: N; depthwise: equals ``c_in``).
        kernel: Kernel size (1, 3, 5; dense: 1).
        stride: Stride (1 or 2; dense: 1).
    """

    kind: str
    c_in: int
    size: int
    c_out: int
    kernel: int = 1
    stride: int = 1

    @property
    def name(self) -> str:
        """Stable, readable name that identifies the workload."""
        if self.kind == "dense":
            return f"dense_m{self.size}_k{self.c_in}_n{self.c_out}"
        return (f"{self.kind}_c{self.c_in}_h{self.size}_o{self.c_out}"
                f"_k{self.kernel}_s{self.stride}")

    @property
    def padding(self) -> int:
        """Same-style padding: ``kernel // 2``."""
        return self.kernel // 2

    def flops(self) -> float:
        """Multiply-adds x 2 of the direct algorithm (winograd counted as direct)."""
        k, s = self.kernel, self.stride
        if self.kind == "dense":
            return 2.0 * self.size * self.c_in * self.c_out
        if self.kind in ("conv1d", "conv1d_transpose"):
            out = self.size * s if self.kind.endswith("transpose") else -(-self.size // s)
            return 2.0 * self.c_in * self.c_out * k * out
        out = self.size * s if self.kind == "conv2d_transpose" else -(-self.size // s)
        if self.kind == "depthwise":
            return 2.0 * self.c_in * k * k * out * out
        return 2.0 * self.c_in * self.c_out * k * k * out * out

    def to_dict(self) -> dict:
        """Plain dict (for JSON), name included."""
        return {**asdict(self), "name": self.name}

    def prim_func(self):
        """Build the workload as a TIR ``PrimFunc`` (TOPI compute, ``te.create_prim_func``)."""
        from tvm import te, topi

        f32 = "float32"
        c, n, o, k, s, p = self.c_in, self.size, self.c_out, self.kernel, self.stride, self.padding
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
            pad = max(0, (k - s + 1) // 2)
            args = [x, w, topi.nn.conv1d_transpose_ncw(x, w, s, pad, f32, 0)]
        elif self.kind == "conv2d_transpose":
            x = te.placeholder((1, c, n, n), f32, "data")
            w = te.placeholder((c, o, k, k), f32, "weight")
            pad = max(0, (k - s + 1) // 2)
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


def sample_workload(kind: str, rng: random.Random) -> Workload:
    """Draw one workload of ``kind`` within the module's ranges (rejection on FLOPs).

    Args:
        kind: One of :data:`KINDS`.
        rng: The random generator (drives reproducibility).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown workload kind {kind!r}: choose one of {', '.join(KINDS)}")
    for _ in range(1000):
        if kind == "dense":
            wl = Workload("dense", rng.choice((256, 512, 1024, 2048, 4096)),
                          rng.choice((1, 4, 16, 64)), rng.choice((64, 256, 1000, 1024, 4096)))
        else:
            one_d = kind.startswith("conv1d")
            size = rng.choice(_SPATIAL_1D if one_d else _SPATIAL_2D)
            c_in = rng.choice(_CHANNELS)
            kernel = 3 if kind == "winograd" else rng.choice((3, 5) if kind == "depthwise"
                                                              else (1, 3, 5))
            stride = 1 if kind == "winograd" else rng.choice((1, 2))
            c_out = c_in if kind == "depthwise" else rng.choice(_CHANNELS)
            wl = Workload(kind, c_in, size, c_out, kernel, stride)
        if MIN_FLOPS <= wl.flops() <= MAX_FLOPS:
            return wl
    raise RuntimeError(f"could not draw a {kind} workload within the FLOP range")


def training_workloads(per_kind: int = 6, seed: int = 0) -> list[Workload]:
    """The training set: ``per_kind`` distinct workloads of each of the seven kinds.

    Args:
        per_kind: Workloads per kind.
        seed: Random seed; the same seed gives the same list.

    Returns:
        ``per_kind * 7`` distinct workloads, ordered kind by kind.
    """
    rng = random.Random(seed)
    out: list[Workload] = []
    for kind in KINDS:
        seen: set[str] = set()
        while len(seen) < per_kind:
            wl = sample_workload(kind, rng)
            if wl.name not in seen:
                seen.add(wl.name)
                out.append(wl)
    return out
