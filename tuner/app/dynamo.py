"""The ``torch.compile`` backend: ``torch.compile(model, backend="metatune")``.

Each graph TorchDynamo captures is imported into Relax as ``tune.py`` imports a network
(:mod:`tuner.engine.fx_graph`: weights bound, batch norm folded; the same
:class:`~tuner.engine.tasks.Lowering`), compiled with the schedules of a tuning database
(:func:`tuner.engine.evaluate.compile_network`) and run on torch tensors through DLPack
(:class:`metatune.deploy.VMFunction`)::

    import torch
    model = torch.compile(model, backend="metatune", options={"work_dir": "work/resnet-18"})
    y = model(x)

Options (all optional): ``work_dir``, the work dir of a ``tune.py`` run (default: the
``METATUNE_WORK_DIR`` environment variable); ``memory``, this machine's tuning memory
(docs/memory.md; default ``True``: where ``tune.py`` keeps it; a path; ``False``: not
read); ``target`` (``tune.py``'s ``--target``, default ``llvm``: this CPU); ``layout``
(default: the work dir's, from its ``settings.json``, else ``NHWC``); ``precision``
(``fp32`` or ``bf16``, docs/precision.md; default: the work dir's, else ``fp32``). The graph is
compiled with the fastest schedule of each function that the work dir or the memory
holds; with neither, untuned, with one warning.

The backend compiles for inference: the weights are frozen when a graph is compiled (a
weight changed in place later makes that graph run in PyTorch, with a warning), and no
gradient flows through the compiled graph. A graph it cannot import (an op Relax's
importer lacks, symbolic shapes, tensors on another device) runs in PyTorch, with one
:class:`FallbackWarning` naming the reason. The backend is registered by name when
:mod:`tuner` is imported and through the ``torch_dynamo_backends`` entry point of the
installed package (``pyproject.toml``), so ``backend="metatune"`` needs no import.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from metatune.errors import ConfigError, MetaTuneError, TuningMemoryError, WorkDirError, one_line
from tuner.app.preflight import OLD_LAYOUT, read_settings
from tuner.engine.database import (
    RECORD_FILE,
    describe_target,
    open_database,
    target_counts,
    target_key,
)
from tuner.engine.tasks import LAYOUTS, Lowering

logger = logging.getLogger(__name__)

#: The environment variable naming the default work dir.
ENV_WORK_DIR = "METATUNE_WORK_DIR"
#: The layout of a graph compiled with a work dir that records none (``tune.py``'s default).
DEFAULT_LAYOUT = "NHWC"


class FallbackWarning(UserWarning):
    """A graph (or part of one) runs in PyTorch instead of TVM, or untuned."""


@dataclass(frozen=True)
class BackendOptions:
    """The backend's ``options``.

    Attributes:
        work_dir: A ``tune.py`` work dir whose database to compile with, or ``None``.
        target: ``llvm`` (this CPU), ``cuda``, ``rocm`` or a JSON target dict.
        layout: ``NCHW`` or ``NHWC``; ``None``: the work dir's, else ``NHWC``.
        memory: Read the tuning memory: ``True`` (its usual place), a path, or ``False``.
        precision: ``fp32`` or ``bf16``; ``None``: the work dir's, else ``fp32``.
    """

    work_dir: str | None = None
    target: str = "llvm"
    layout: str | None = None
    memory: bool | str = True
    precision: str | None = None

    @classmethod
    def parse(cls, options: dict | None) -> BackendOptions:
        """Options from ``torch.compile(..., options=...)``, the work dir defaulting to
        ``$METATUNE_WORK_DIR``.

        Raises:
            ConfigError: An unknown key, layout or precision.
        """
        from tuner.engine.precision import PRECISIONS

        options = dict(options or {})
        unknown = sorted(set(options) - {"work_dir", "target", "layout", "memory", "precision"})
        if unknown:
            raise ConfigError(f"torch.compile(backend='metatune') got unknown option(s) "
                              f"{', '.join(map(repr, unknown))}: it takes work_dir, target, "
                              "layout, memory, precision")
        work_dir = options.get("work_dir") or os.environ.get(ENV_WORK_DIR) or None
        layout = options.get("layout")
        if layout is not None and str(layout).upper() not in LAYOUTS:
            raise ConfigError(f"layout={layout!r}: choose one of {', '.join(LAYOUTS)}")
        precision = options.get("precision")
        if precision is not None and str(precision) not in PRECISIONS:
            raise ConfigError(f"precision={precision!r}: choose one of {', '.join(PRECISIONS)}")
        memory = options.get("memory", True)
        memory = os.fspath(memory) if isinstance(memory, (str, os.PathLike)) else bool(memory)
        return cls(os.fspath(work_dir) if work_dir else None,
                   str(options.get("target") or "llvm"),
                   str(layout).upper() if layout is not None else None, memory,
                   str(precision) if precision is not None else None)


def warn(message: str) -> None:
    """Warn (:class:`FallbackWarning`) at the user's line: the innermost caller outside
    torch, the standard library and this project, that is, where the model was called."""
    import torch

    internal = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                     for m in (torch, contextlib, sys.modules["tuner"], sys.modules["metatune"]))
    level, frame = 2, sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename.startswith(internal)
                                 or frame.f_code.co_filename.startswith("<frozen")):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"metatune: {message}", FallbackWarning, stacklevel=level if frame else 2)


def fall_back(gm, reason: str) -> Callable:
    """Warn that ``gm`` runs in PyTorch, and return its ``forward``."""
    warn(f"this graph runs in PyTorch, not TVM: {reason}")
    return gm.forward


def work_dir_layout(work_dir: str) -> str:
    """The data layout a work dir was tuned in (its ``settings.json``)."""
    settings = read_settings(work_dir)
    return DEFAULT_LAYOUT if settings is None else str(settings.get("layout") or OLD_LAYOUT)


def work_dir_precision(work_dir: str) -> str:
    """The precision a work dir was tuned in (its ``settings.json``; ``fp32`` without)."""
    settings = read_settings(work_dir) or {}
    return str(settings.get("precision") or "fp32")


def lowering_for(target_info, layout: str, precision: str) -> Lowering:
    """The lowering to compile with: packed weights, ``layout`` and ``precision``, the
    precision checked against the target.

    Raises:
        ConfigError: ``bf16`` with NCHW or on a CPU without AVX-512 BF16.
    """
    from tuner.engine.precision import check_precision

    check_precision(precision, layout, target_info.target)
    return Lowering(pack_weights=True, layout=layout, precision=precision)


def open_memory(opts: BackendOptions, target_info):
    """This machine's tuning memory for the target as a read-only database
    (:class:`tuner.engine.memory_view.MemoryView`), ``None`` when it is off, absent or
    empty, or cannot be read (logged)."""
    from tuner.engine.memory import MachineMemory, memory_key, memory_root

    root = memory_root(opts.memory if isinstance(opts.memory, str) else None)
    if opts.memory is False or root is None:
        return None
    key = memory_key(target_info.target)
    if not os.path.isfile(os.path.join(root, key.name(), RECORD_FILE)):
        return None
    try:
        memory = MachineMemory.open(root, key)
    except TuningMemoryError as err:
        logger.warning("metatune: %s", err)
        return None
    from tuner.engine.memory_view import MemoryView

    return MemoryView(memory) if memory.files.valid else None


def open_tuned(opts: BackendOptions, target_info):
    """The database to compile with, the lowering it was tuned with, and where its
    schedules come from (for messages).

    Returns:
        ``(database, lowering, source)``; ``(None, None, None)`` when neither a work dir
        with records nor the tuning memory has any (warned).

    Raises:
        WorkDirError: ``work_dir`` is not a directory.
    """
    from tuner.search.zero_shot import with_predictions

    memory = open_memory(opts, target_info)
    alone = lowering_for(target_info, opts.layout or DEFAULT_LAYOUT,  # memory only
                         opts.precision or "fp32")
    if opts.work_dir is None:
        if memory is not None:
            return memory, alone, "the tuning memory"
        warn(f"no tuning database (pass options={{'work_dir': DIR}} or set {ENV_WORK_DIR}): "
             "compiling untuned")
        return None, None, None
    if not os.path.isdir(opts.work_dir):
        raise WorkDirError(f"work_dir {opts.work_dir!r} is not a directory: pass the work dir "
                           "of a tune.py run")
    if not os.path.isfile(os.path.join(opts.work_dir, RECORD_FILE)):
        if memory is not None:
            return memory, alone, "the tuning memory"
        warn(f"{opts.work_dir} holds no tuning records: compiling untuned")
        return None, None, None
    ours = target_key(target_info.target.export())
    foreign = set(target_counts(opts.work_dir)) - {ours}
    if foreign:
        warn(f"{opts.work_dir} holds records measured for "
             f"{describe_target(next(iter(foreign)))}, not {describe_target(ours)}: their "
             "schedules are used, tuned for that machine")
    layout = opts.layout or work_dir_layout(opts.work_dir)
    database, source = open_database(opts.work_dir), opts.work_dir
    if memory is not None:  # the fastest record of the two wins
        from tvm.s_tir import meta_schedule as ms

        database = ms.database.UnionDatabase(database, memory)
        source += " and the tuning memory"
    database = with_predictions(database, opts.work_dir)
    precision = opts.precision or work_dir_precision(opts.work_dir)
    return database, lowering_for(target_info, layout, precision), source


def count_scheduled(fused_mod, database, target) -> tuple[int, int]:
    """How many distinct functions of a fused module the database has a schedule for.

    Returns:
        ``(with a schedule, functions)``.
    """
    import tvm

    normalize = tvm.get_global_func("tvm.s_tir.meta_schedule.normalize_mod")
    found = total = 0
    for gv, func in fused_mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        total += 1
        found += database.query_schedule(normalize(func), target, gv.name_hint) is not None
    return found, total


def compile_graph(graph, opts: BackendOptions, target_info):
    """Compile a :class:`~tuner.engine.fx_graph.CapturedGraph` for ``target_info``, with
    the database of ``opts.work_dir`` and the tuning memory (untuned without either).

    Returns:
        The :class:`~tuner.engine.evaluate.CompiledNetwork`.
    """
    from tuner.engine.evaluate import compile_network, compile_untuned

    database, lowering, source = open_tuned(opts, target_info)
    if database is None:
        return compile_untuned(graph.relax_mod, target_info.target, target_info.device_type)
    fused: list = []
    compiled = compile_network(graph.relax_mod, target_info.target, database,
                               target_info.device_type, lowering, on_fused=fused.append)
    found, total = count_scheduled(fused[0], database, target_info.target)
    logger.info("metatune: %d of %d functions scheduled from %s (layout %s, %s)", found,
                total, source, lowering.layout, lowering.precision)
    if total and not found:
        warn(f"none of this graph's {total} functions is in {source} "
             "(tuned for another network, batch or layout?): they run untuned")
    return compiled


def _runner(graph, function, gm) -> Callable:
    """The compiled graph's callable: takes every graph input (weights too, as Dynamo
    passes them), runs TVM on the user inputs, and returns the outputs as the graph does.
    Weights changed since compilation (in place or replaced) make it run ``gm`` instead."""
    frozen = [(pos, w.data_ptr(), w._version) for pos, w in graph.weights]
    user = graph.user_inputs
    stale: list[bool] = []

    def run(*args):
        if stale or any(args[p].data_ptr() != ptr or args[p]._version != version
                        for p, ptr, version in frozen):
            if not stale:
                stale.append(True)
                warn("a weight changed after torch.compile compiled this graph; it runs in "
                     "PyTorch from now on (call torch._dynamo.reset() and compile again to "
                     "compile the new weights)")
            return gm.forward(*args)
        outputs = function(*(args[i] for i in user))
        return list(outputs) if graph.returns_list else outputs

    return run


def metatune_backend(gm, example_inputs: Sequence, options: dict | None = None,
                     mode: str | None = None) -> Callable:
    """The ``torch.compile`` backend (``backend="metatune"``).

    Args:
        gm: The ``torch.fx.GraphModule`` TorchDynamo captured.
        example_inputs: Its inputs (the module's weights included).
        options: ``work_dir``, ``memory``, ``target``, ``layout`` (see the module's
            docstring).
        mode: ``torch.compile``'s ``mode``; ignored (the database decides the schedules).

    Returns:
        A callable taking the graph's inputs and returning its outputs: TVM's compiled
        graph, or ``gm.forward`` where it falls back to PyTorch.

    Raises:
        metatune.errors.MetaTuneError: Unknown options, an unavailable target, a work dir
            that is not a directory or a database TVM cannot read.
    """
    from metatune.deploy import TORCH_DEVICE, VMFunction
    from tuner.engine.fx_graph import UnsupportedGraphError, import_graph
    from tuner.engine.targets import resolve_target

    opts = BackendOptions.parse(options)
    try:
        graph = import_graph(gm, example_inputs)
    except UnsupportedGraphError as err:
        return fall_back(gm, str(err))
    target_info = resolve_target(opts.target)
    want = TORCH_DEVICE.get(target_info.device_type, target_info.device_type)
    devices = {example_inputs[i].device.type for i in graph.user_inputs}
    if devices - {want}:
        return fall_back(gm, f"inputs on {', '.join(sorted(devices))}, but target "
                             f"{opts.target!r} runs on {want}: pass options={{'target': ...}}")
    try:
        compiled = compile_graph(graph, opts, target_info)
    except MetaTuneError:
        raise  # a bad work dir or database: the user's to fix, not a reason to fall back
    except Exception as err:  # TVM's lowering raises its own types (an op without legalization)
        return fall_back(gm, f"TVM could not compile it ({type(err).__name__}: "
                             f"{one_line(err, 200)})")
    return _runner(graph, VMFunction(compiled.vm, target_info.device_type), gm)
