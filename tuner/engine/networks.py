"""Networks to tune: built-in networks, user ``nn.Module`` factories and ONNX files.

Every source ends as a :class:`Network`: a Relax module with its weights bound as
constants (so task extraction and the final compile see identical functions) plus a
reference implementation to check the compiled output and to time PyTorch against.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from metatune.errors import ConfigError, ModelImportError, UnknownNetworkError, one_line

logger = logging.getLogger(__name__)

#: The input shape (without the batch) of an image network and of ``--model`` by default.
DEFAULT_INPUT_SHAPE = (3, 224, 224)


@dataclass(frozen=True)
class BuiltinNetwork:
    """A built-in network: how to build it and what it takes.

    Attributes:
        factory: ``module:callable`` building the ``nn.Module`` with random weights when
            called without arguments.
        input_shape: Its default input shape, without the batch.
        fixed_dims: The positions in ``input_shape`` that ``--input-shape`` may not change
            (an image network's channels, an encoder's hidden size).
        takes: What the input is, for messages.
        max_dims: ``(position, largest size)`` of the dimensions that have a bound (an
            encoder's sequence: its position embeddings).
    """

    factory: str
    input_shape: tuple[int, ...] = DEFAULT_INPUT_SHAPE
    fixed_dims: tuple[int, ...] = (0,)
    takes: str = "an image, channels x height x width"
    max_dims: tuple[tuple[int, int], ...] = ()


_ENCODER_INPUT = "token embeddings (float, the word-embedding lookup's output), sequence x hidden"
#: The encoders' sequence bound: ``EncoderConfig.max_positions`` (position embeddings).
_ENCODER_MAX_DIMS = ((0, 512),)
#: Built-in networks: name -> how to build it (torchvision's constructors, or
#: :mod:`tuner.engine.builtin_models`).
BUILTIN_NETWORKS: dict[str, BuiltinNetwork] = {
    "alexnet": BuiltinNetwork("torchvision.models:alexnet"),
    "resnet-18": BuiltinNetwork("torchvision.models:resnet18"),
    "vgg-16": BuiltinNetwork("torchvision.models:vgg16"),
    "squeezenet": BuiltinNetwork("torchvision.models:squeezenet1_0"),
    "mobilenet-v2": BuiltinNetwork("torchvision.models:mobilenet_v2"),
    "convnext-atto": BuiltinNetwork("tuner.engine.builtin_models:convnext_atto"),
    "bert-tiny": BuiltinNetwork("tuner.engine.builtin_models:bert_tiny", (128, 128), (1,),
                                _ENCODER_INPUT, _ENCODER_MAX_DIMS),
    "bert-mini": BuiltinNetwork("tuner.engine.builtin_models:bert_mini", (128, 256), (1,),
                                _ENCODER_INPUT, _ENCODER_MAX_DIMS),
}


@dataclass
class Network:
    """A network ready for task extraction and compilation.

    Attributes:
        name: Display name (``"resnet-18"``, the ONNX file stem, ``module:callable``).
        input_shape: Full input shape, batch included, e.g. ``(1, 3, 224, 224)``.
        relax_mod: Relax ``IRModule`` with weights bound as constants (not yet legalized).
        reference: ``f(x: np.ndarray) -> np.ndarray`` computing the expected output.
        torch_module: The ``nn.Module`` when the network comes from PyTorch, else ``None``.
        notes: What was done on import (e.g. batch-norm folding), for the report.
    """

    name: str
    input_shape: tuple[int, ...]
    relax_mod: object
    reference: Callable[[np.ndarray], np.ndarray]
    torch_module: object | None = None
    notes: list[str] = field(default_factory=list)

    def example_input(self, seed: int = 0) -> np.ndarray:
        """A reproducible random input, a float32 array of :attr:`input_shape`."""
        return np.random.default_rng(seed).standard_normal(self.input_shape).astype("float32")


def _describe_error(err: BaseException) -> str:
    """One line of an exception raised by user code, torch or TVM (whose messages may run
    over many lines): its type and first line, and where a syntax error is."""
    if isinstance(err, SyntaxError):
        where = f"{os.path.basename(err.filename or '?')}, line {err.lineno}"
        return f"SyntaxError: {err.msg} ({where})"
    return f"{type(err).__name__}: {one_line(err, 200)}"


def builtin(name: str) -> BuiltinNetwork:
    """A built-in network's entry of :data:`BUILTIN_NETWORKS`.

    Raises:
        UnknownNetworkError: ``name`` is not a built-in network.
    """
    if name not in BUILTIN_NETWORKS:
        raise UnknownNetworkError(
            f"unknown network {name!r}: choose one of {', '.join(BUILTIN_NETWORKS)}, "
            "or bring your own with --onnx PATH or --model module:callable"
        )
    return BUILTIN_NETWORKS[name]


def builtin_module(name: str):
    """Construct a built-in network with random weights (seed 0), in eval mode.

    Raises:
        UnknownNetworkError: ``name`` is not a built-in network.
    """
    import torch

    module_name, _, attr = builtin(name).factory.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    torch.manual_seed(0)
    return factory().eval()  # torchvision's constructors default to weights=None


def builtin_input_shape(name: str, given: tuple[int, ...] | None) -> tuple[int, ...]:
    """A built-in network's input shape without the batch: ``given`` (``--input-shape``)
    when it keeps the network's fixed dimensions, else the network's default.

    Raises:
        UnknownNetworkError: ``name`` is not a built-in network.
        ConfigError: ``given`` has another rank, changes a fixed dimension or exceeds a
            bounded one.
    """
    spec = builtin(name)
    if given is None:
        return spec.input_shape
    default = spec.input_shape
    if len(given) != len(default) or any(given[i] != default[i] for i in spec.fixed_dims):
        fixed = ", ".join(f"dim {i + 1} = {default[i]}" for i in spec.fixed_dims)
        raise ConfigError(
            f"--input-shape {','.join(map(str, given))}: {name} takes {spec.takes}, "
            f"{len(default)} dims without the batch with {fixed} (default "
            f"{','.join(map(str, default))})")
    for i, most in spec.max_dims:
        if given[i] > most:
            raise ConfigError(
                f"--input-shape {','.join(map(str, given))}: {name} takes at most {most} in "
                f"dim {i + 1} ({spec.takes}); pass {most} or less")
    return tuple(given)


def user_module(spec: str):
    """Import ``module:callable`` and call it to get an ``nn.Module`` (put in eval mode).

    Raises:
        ModelImportError: The spec is malformed, the import fails, or the callable does
            not return an ``nn.Module``.
    """
    import torch

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ModelImportError(
            f"--model {spec!r}: expected 'module:callable', e.g. 'torchvision.models:resnet50'"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # a user's module may raise anything while it is imported
        raise ModelImportError(f"--model {spec!r}: cannot import {module_name} "
                               f"({_describe_error(err)})") from err
    try:
        factory = getattr(module, attr)
    except AttributeError as err:
        raise ModelImportError(f"--model {spec!r}: cannot import {attr!r} from {module_name} "
                               "(it has no such name)") from err
    if not callable(factory):
        raise ModelImportError(
            f"--model {spec!r} is a {type(factory).__name__}, not a callable; give a "
            "function or class that returns a torch.nn.Module when called without arguments")
    torch.manual_seed(0)  # a factory that initialises at random builds the same weights
    try:
        model = factory()
    except Exception as err:  # a user's factory may raise anything
        first = one_line(err, 160)
        raise ModelImportError(
            f"--model {spec!r}: calling it without arguments failed ({type(err).__name__}: "
            f"{first}); give a callable that builds the model with no arguments, e.g. a "
            "function in your own module") from err
    if not isinstance(model, torch.nn.Module):
        raise ModelImportError(
            f"--model {spec!r} returned {type(model).__name__}, not a torch.nn.Module"
        )
    return model.eval()


def fold_batch_norm(model):
    """Fold eval-mode BatchNorm layers into the preceding convolutions, as compilers do.

    Args:
        model: An ``nn.Module`` in eval mode.

    Returns:
        ``(model, folded)``: the folded module (a ``GraphModule``) and whether anything
        was folded; the input module unchanged when it cannot be traced symbolically.
    """
    import torch
    from torch.fx.experimental.optimization import fuse

    if not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return model, False
    try:
        fused = fuse(model)
    except Exception as err:  # torch.fx raises many types on untraceable code
        logger.warning("batch-norm folding skipped: model not traceable by torch.fx (%s)", err)
        return model, False
    left = sum(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in fused.modules())
    return fused, left == 0


def torch_to_relax(model, input_shape: tuple[int, ...]):
    """Import an ``nn.Module`` into Relax through ``torch.export`` with weights bound.

    Raises:
        ModelImportError: ``torch.export`` or the Relax importer fails.
    """
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    example = torch.zeros(input_shape, dtype=torch.float32)
    try:
        with torch.no_grad():
            exported = torch.export.export(model, (example,))
        mod = from_exported_program(exported, keep_params_as_input=True)
    except Exception as err:
        raise ModelImportError(
            f"could not import the model into TVM Relax via torch.export: "
            f"{_describe_error(err)}") from err
    return bind_weights(mod)


def bind_weights(mod):
    """Bind the weights of a ``keep_params_as_input`` Relax module as constants.

    Args:
        mod: A Relax module whose ``main`` takes the input(s) first, then the weights.

    Returns:
        The module with ``main`` taking only the inputs.
    """
    from tvm import relax

    mod, params = relax.frontend.detach_params(mod)
    weights = params.get("main", [])
    if not weights:
        return mod
    func_params = mod["main"].params
    named = dict(zip(func_params[len(func_params) - len(weights):], weights, strict=True))
    return relax.transform.BindParams("main", named)(mod)


def load_torch_network(
    model, name: str, input_shape: tuple[int, ...], fold_bn: bool = True
) -> Network:
    """Wrap a PyTorch module as a :class:`Network` (optionally folding batch norm)."""
    import torch

    notes: list[str] = []
    if fold_bn:
        model, folded = fold_batch_norm(model)
        if folded:
            notes.append("batch-norm folded into convolution weights")

    def reference(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model(torch.from_numpy(x)).numpy()

    mod = torch_to_relax(model, input_shape)
    return Network(name, input_shape, mod, reference, torch_module=model, notes=notes)


def load_onnx_network(path: str, input_shape: tuple[int, ...] | None) -> Network:
    """Load an ONNX file as a :class:`Network`; the reference is ONNX's own evaluator.

    Raises:
        ModelImportError: The file is missing, unreadable, or not importable.
    """
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    if not os.path.isfile(path):
        raise ModelImportError(f"--onnx {path!r}: no such file")
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as err:
        raise ModelImportError(
            f"--onnx {path!r} is not a readable ONNX model ({_describe_error(err)}); "
            "re-export it with torch.onnx.export or onnx.save"
        ) from err
    graph_input = model.graph.input[0]
    if input_shape is None:
        dims = [d.dim_value for d in graph_input.type.tensor_type.shape.dim]
        if not dims or any(d <= 0 for d in dims):
            raise ModelImportError(
                f"--onnx {path!r} has a dynamic input shape {dims}: pass --input-shape"
            )
        input_shape = tuple(dims)
    try:
        mod = bind_weights(
            from_onnx(model, shape_dict={graph_input.name: list(input_shape)},
                      keep_params_in_input=True)
        )
    except Exception as err:
        raise ModelImportError(f"--onnx {path!r}: TVM could not import it "
                               f"({_describe_error(err)})") from err

    def reference(x: np.ndarray) -> np.ndarray:
        from onnx.reference import ReferenceEvaluator

        return np.asarray(ReferenceEvaluator(model).run(None, {graph_input.name: x})[0])

    name = os.path.splitext(os.path.basename(path))[0]
    return Network(name, tuple(input_shape), mod, reference)


def load_network(
    network: str | None = None,
    *,
    onnx_path: str | None = None,
    model_spec: str | None = None,
    input_shape: tuple[int, ...] | None = None,
    batch: int = 1,
    fold_bn: bool = True,
) -> Network:
    """Load the network named by the tune configuration.

    ``onnx_path`` wins over ``model_spec``, which wins over ``network``.

    Args:
        network: A built-in network name.
        onnx_path: Path of an ONNX file.
        model_spec: ``module:callable`` returning an ``nn.Module``.
        input_shape: Input shape without the batch dimension, e.g. (C, H, W); defaults to
            a built-in network's own (:data:`BUILTIN_NETWORKS`: ``(3, 224, 224)`` for the
            CNNs, ``(128, 128)`` for ``bert-tiny``), ``(3, 224, 224)`` for ``model_spec``
            (ONNX: read from the file).
        batch: Batch size.
        fold_bn: Fold batch norm into convolutions (PyTorch models).

    Returns:
        The loaded :class:`Network`.

    Raises:
        UnknownNetworkError: ``network`` is not built in (and nothing else is given).
        ConfigError: ``input_shape`` does not fit the built-in network.
        ModelImportError: The model cannot be loaded or imported.
    """
    full_shape = (batch, *input_shape) if input_shape else None
    if onnx_path:
        return load_onnx_network(onnx_path, full_shape)
    if model_spec:
        shape = full_shape or (batch, *DEFAULT_INPUT_SHAPE)
        return load_torch_network(user_module(model_spec), model_spec, shape, fold_bn)
    if not network:
        raise UnknownNetworkError(
            f"no network given: pass --network ({', '.join(BUILTIN_NETWORKS)}), "
            "--onnx PATH or --model module:callable"
        )
    shape = (batch, *builtin_input_shape(network, input_shape))
    return load_torch_network(builtin_module(network), network, shape, fold_bn)
