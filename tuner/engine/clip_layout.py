"""``clip`` rewritten so that the NHWC conversion moves it with the convolutions.

``relax.transform.ConvertLayout`` has no layout rule for ``relax.clip`` (ReLU6, and the
clip inside hard-swish and hard-sigmoid, as the PyTorch importer emits them), so in an
NHWC network it transposes every clip's input back to NCHW and its output to NHWC again.
In mobilenet-v2 tuned for 128 trials on the 2-core EPYC, those transpose-clip-transpose
kernels took 1.80 of the network's 6.52 ms, and each left its convolution unfused
(``experiments/openvino_layers.py``, docs/lab/compile/README.md). ``minimum(maximum(x,
lo), hi)`` computes the same, and ConvertLayout moves both (binary elementwise ops with a
scalar), so :func:`clip_to_min_max` rewrites each clip with constant bounds before the
conversion; ``FuseOps`` then fuses them into the convolution before them.
"""

from __future__ import annotations

from tuner.engine.relax_rewrite import dtype


def _bound(value) -> float | None:
    """A clip bound as a float (an immediate, or a value wrapping one), ``None`` when it is
    not a constant."""
    for _ in range(2):
        value = getattr(value, "value", None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def clip_to_min_max():
    """A function pass: every ``relax.clip(x, lo, hi)`` with constant bounds on a float tensor
    becomes ``relax.minimum(relax.maximum(x, lo), hi)``; other calls are left as they are."""
    from tvm import relax
    from tvm.relax.dpl import is_op, rewrite_call, wildcard

    x, lo, hi = wildcard(), wildcard(), wildcard()
    pattern = is_op("relax.clip")(x, lo, hi)

    def rewrite(expr, matches):
        data = matches[x]
        kind = dtype(expr) or dtype(data)
        low, high = _bound(matches[lo]), _bound(matches[hi])
        if low is None or high is None or not kind.startswith(("float", "bfloat")):
            return expr
        return relax.op.minimum(relax.op.maximum(data, relax.const(low, kind)),
                                relax.const(high, kind))

    @relax.transform.function_pass(opt_level=0, name="ClipToMinMax")
    def transform(func, _mod, _ctx):  # the pass infrastructure copies the module
        return rewrite_call(pattern, rewrite, func)

    return transform
