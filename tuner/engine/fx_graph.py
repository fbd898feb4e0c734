"""A graph captured by ``torch.compile`` (TorchDynamo's FX ``GraphModule``) as a Relax module.

Dynamo passes a module's weights to its graph as inputs, beside the user's. They are
frozen here: bound as constants, as :mod:`tuner.engine.networks` binds a network's, so that
extraction and compilation see the same fused functions as ``tune.py`` did. Eval-mode
batch norms after a convolution are folded into its weights and bias (as
:func:`tuner.engine.networks.fold_batch_norm` folds a network's), then the graph goes
through ``torch.export`` and Relax's ``from_exported_program``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass

from metatune.errors import ModelImportError, one_line
from tuner.engine.networks import bind_weights


class UnsupportedGraphError(ModelImportError):
    """A captured graph that cannot become a Relax module (an op Relax's importer lacks,
    symbolic shapes, ...); the caller runs it in PyTorch instead."""


#: Where Dynamo says an input comes from, for a module's weight (a source name such as
#: ``L['self']._modules['0']._parameters['weight']``), or the placeholder's own name.
_WEIGHT_SOURCE = re.compile(r"\._(parameters|buffers)\[")
_WEIGHT_NAME = re.compile(r"_(parameters|buffers)_")


@dataclass
class CapturedGraph:
    """A Dynamo graph imported into Relax.

    Attributes:
        relax_mod: The Relax module, weights bound as constants; ``main`` takes the user
            inputs, in order.
        user_inputs: Positions of the user inputs among the graph's inputs.
        weights: ``(position, tensor)`` of every frozen weight input, as given at capture.
        folded: How many batch norms were folded into convolutions.
        returns_list: Whether the graph returns a list (else a tuple).
    """

    relax_mod: object
    user_inputs: list[int]
    weights: list[tuple[int, object]]
    folded: int
    returns_list: bool


def _source_name(node) -> str:
    """Dynamo's name of where a placeholder's value comes from (``""`` if unknown)."""
    arg = node.meta.get("grapharg")
    source = getattr(arg, "source", None)
    if source is None:
        return ""
    name = source.name
    return name() if callable(name) else str(name)  # a method before torch 2.10


def is_weight(node, example) -> bool:
    """Whether a graph input is a module's parameter or buffer (frozen), not a user input."""
    import torch

    if isinstance(example, torch.nn.Parameter):
        return True
    source = _source_name(node)
    return bool(_WEIGHT_SOURCE.search(source)) if source else bool(_WEIGHT_NAME.search(node.name))


def check_static(placeholders: Sequence, example_inputs: Sequence) -> None:
    """Refuse inputs that are not tensors of static shape.

    Raises:
        UnsupportedGraphError: A symbolic size or a non-tensor input.
    """
    import torch

    for node, example in zip(placeholders, example_inputs, strict=False):
        if not isinstance(example, torch.Tensor):
            raise UnsupportedGraphError(
                f"dynamic shapes (the graph takes {node.name}, a symbolic size); compile "
                "with dynamic=False, or mark no dimension dynamic")
        fake = node.meta.get("example_value")
        shape = getattr(fake, "shape", ())
        if any(not isinstance(d, int) for d in shape):
            raise UnsupportedGraphError(
                f"dynamic shapes (input {node.name} has shape {tuple(shape)}); compile with "
                "dynamic=False")


def check_inference(gm) -> None:
    """Refuse a graph in training mode (batch statistics, dropout): it would compute
    otherwise than PyTorch, and update no running statistics.

    Raises:
        UnsupportedGraphError: Naming the first training-mode op.
    """
    import torch.nn.functional as F

    # op -> (position of its ``training`` argument, its default)
    ops = {F.batch_norm: (5, False), F.dropout: (2, True), F.dropout1d: (2, True),
           F.dropout2d: (2, True), F.dropout3d: (2, True), F.alpha_dropout: (2, False),
           F.feature_alpha_dropout: (2, False)}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in ops:
            continue
        pos, default = ops[node.target]
        training = node.kwargs.get("training", node.args[pos] if len(node.args) > pos
                                   else default)
        if training is not False:
            raise UnsupportedGraphError(
                f"{node.target.__name__} in training mode: metatune compiles inference "
                "graphs; call model.eval() before compiling")


def freeze(gm, example_inputs: Sequence):
    """A copy of ``gm`` whose weight inputs are constants (``get_attr`` of buffers).

    Returns:
        ``(frozen, user_inputs, weights)``: the frozen ``GraphModule`` (its inputs are the
        user inputs), their positions, and ``(position, tensor)`` of each weight.
    """
    import torch

    graph = copy.deepcopy(gm.graph)
    frozen = torch.fx.GraphModule(gm, graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    check_static(placeholders, example_inputs)
    user, weights = [], []
    for pos, (node, example) in enumerate(zip(placeholders, example_inputs, strict=False)):
        if not is_weight(node, example):
            user.append(pos)
            continue
        weights.append((pos, example))
        attr = f"_metatune_w{pos}"
        frozen.register_buffer(attr, example.detach())
        with graph.inserting_after(placeholders[-1]):
            const = graph.get_attr(attr)
        node.replace_all_uses_with(const)
        graph.erase_node(node)
    frozen.recompile()
    return frozen, user, weights


_BATCH_NORM_ARGS = ("input", "running_mean", "running_var", "weight", "bias", "training",
                    "momentum", "eps")


def _call_args(node, names: Sequence[str], defaults: dict) -> dict:
    """A call node's arguments by name (positional ones first, then keywords, then defaults)."""
    args = dict(defaults)
    args.update(zip(names, node.args, strict=False))
    args.update(node.kwargs)
    return args


def _constant(gm, node):
    """The tensor behind a ``get_attr`` node, ``None`` for ``None``; else raise KeyError."""
    if node is None:
        return None
    if getattr(node, "op", None) == "get_attr":
        return getattr(gm, node.target)
    raise KeyError(node)


def fold_batch_norms(gm) -> int:
    """Fold every eval-mode ``batch_norm(conv2d(x, w, b), ...)`` of constant weights into the
    convolution's weight and bias (``torch.nn.utils.fusion.fuse_conv_bn_weights``, what
    ``torch.fx``'s ``fuse`` computes for a network). Changes ``gm`` in place.

    Returns:
        How many batch norms were folded.
    """
    import torch
    from torch.nn.utils.fusion import fuse_conv_bn_weights

    convs = (torch.conv2d, torch.nn.functional.conv2d)
    folded = 0
    for bn in list(gm.graph.nodes):
        if bn.op != "call_function" or bn.target is not torch.nn.functional.batch_norm \
                or not bn.args:
            continue
        conv = bn.args[0]
        if getattr(conv, "op", None) != "call_function" or conv.target not in convs \
                or len(conv.users) != 1:
            continue
        a = _call_args(bn, _BATCH_NORM_ARGS, {"weight": None, "bias": None, "eps": 1e-5})
        c = _call_args(conv, ("input", "weight", "bias"), {"bias": None})
        if a.get("training") is not False:
            continue  # training mode (or unknown): batch statistics, nothing to fold
        try:
            w, b = _constant(gm, c["weight"]), _constant(gm, c["bias"])
            mean, var = _constant(gm, a["running_mean"]), _constant(gm, a["running_var"])
            gamma, beta = _constant(gm, a["weight"]), _constant(gm, a["bias"])
        except KeyError:
            continue  # a weight computed in the graph: not a constant to fold
        if w is None or mean is None or var is None:
            continue
        with torch.no_grad():
            new_w, new_b = fuse_conv_bn_weights(w, b, mean, var, float(a["eps"]), gamma, beta)
        names = (f"_metatune_folded{folded}_weight", f"_metatune_folded{folded}_bias")
        for name, tensor in zip(names, (new_w, new_b), strict=False):
            gm.register_buffer(name, tensor.detach())
        with gm.graph.inserting_before(conv):
            w_node, b_node = (gm.graph.get_attr(n) for n in names)
        args = list(conv.args) + [None] * max(0, 3 - len(conv.args))
        kwargs = dict(conv.kwargs)
        args[1] = w_node
        if "bias" in kwargs:
            kwargs["bias"] = b_node
        else:
            args[2] = b_node
        conv.args, conv.kwargs = tuple(args), kwargs
        bn.replace_all_uses_with(conv)
        gm.graph.erase_node(bn)
        folded += 1
    if folded:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return folded


_UNSUPPORTED = re.compile(r"Unsupported function types? \[([^\]]*)\]")


def _describe_import_error(err: BaseException) -> str:
    """What Relax or ``torch.export`` refused, naming the op where the message names one."""
    found = _UNSUPPORTED.search(str(err))
    if found:
        names = (op.strip(" '\"") for op in found.group(1).split(","))
        ops = ", ".join(f"aten.{name}" for name in names)
        return f"TVM's Relax importer has no conversion for {ops}"
    return f"{type(err).__name__}: {one_line(err, 200)}"


def import_graph(gm, example_inputs: Sequence) -> CapturedGraph:
    """Import a Dynamo graph into Relax: freeze its weights, fold batch norms, export.

    Args:
        gm: The ``torch.fx.GraphModule`` Dynamo captured (not changed).
        example_inputs: Its inputs (real tensors), weights included.

    Returns:
        The :class:`CapturedGraph`.

    Raises:
        UnsupportedGraphError: Symbolic shapes, or ``torch.export`` or the Relax importer
            fails (the message names the op Relax lacks).
    """
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    check_inference(gm)
    frozen, user, weights = freeze(gm, example_inputs)
    folded = fold_batch_norms(frozen)
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    args = tuple(example_inputs[i] for i in user)
    try:
        with torch.no_grad():
            exported = torch.export.export(frozen, args)
    except Exception as err:  # torch.export raises many types
        raise UnsupportedGraphError(f"torch.export failed ({_describe_import_error(err)})") \
            from err
    try:
        mod = from_exported_program(exported, keep_params_as_input=True)
    except Exception as err:  # the importer asserts, raises ValueError, TVMError, ...
        raise UnsupportedGraphError(_describe_import_error(err)) from err
    return CapturedGraph(bind_weights(mod), user, weights, folded,
                         isinstance(output.args[0], list))
