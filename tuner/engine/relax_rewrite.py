"""What the graph rewrites before fusion share (:mod:`tuner.engine.clip_layout`,
:mod:`~tuner.engine.permute_fold`, :mod:`~tuner.engine.activation_fusion`,
:mod:`~tuner.engine.fast_math`): an expression's tensor type, a pattern matching any of
several operators, and a function pass that applies rewrite rules until nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def dtype(expr) -> str:
    """The tensor dtype of a Relax expression, ``""`` where it is not known yet."""
    try:
        return str(expr.ty.dtype)  # the struct info (``ty`` in TVM 0.27)
    except Exception:  # no type inferred yet, or not a tensor; TVM raises its own errors
        return ""


def ndim(expr) -> int:
    """The rank of a tensor expression, -1 where it is not known."""
    try:
        return int(expr.ty.ndim)
    except (AttributeError, TypeError, ValueError):
        return -1


def static_shape(expr) -> list[int] | None:
    """A tensor expression's static shape, ``None`` where it is not known or not static."""
    try:
        return [int(d) for d in expr.ty.shape]
    except (AttributeError, TypeError, ValueError):
        return None


def any_op(names: Sequence[str], *args):
    """A pattern matching a call of any of the operators ``names`` on ``args`` (patterns)."""
    from tvm.relax.dpl import is_op

    pattern = is_op(names[0])(*args)
    for name in names[1:]:
        pattern = pattern | is_op(name)(*args)
    return pattern


def fixpoint_pass(name: str, rules: Sequence[tuple[object, Callable]], max_rounds: int):
    """A Relax function pass applying each ``(pattern, rewrite)`` of ``rules`` with
    ``rewrite_call``, round after round, until a round changes nothing (at most
    ``max_rounds`` rounds). The pass infrastructure copies the module it is given."""
    import tvm_ffi
    from tvm import relax
    from tvm.relax.dpl import rewrite_call

    @relax.transform.function_pass(opt_level=0, name=name)
    def transform(func, _mod, _ctx):
        for _ in range(max_rounds):
            before = func
            for pattern, rewrite in rules:
                func = rewrite_call(pattern, rewrite, func)
            if tvm_ffi.structural_equal(before, func):
                break
        return func

    return transform
