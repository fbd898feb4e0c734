"""Exceptions raised by MetaTune, each with a message that says what to do."""

from __future__ import annotations


class MetaTuneError(Exception):
    """Base class of every error MetaTune raises on purpose.

    Entry points catch it and print its message on one line, without a traceback.
    """


class ConfigError(MetaTuneError, ValueError):
    """A configuration key or value is invalid (unknown key, budget <= 0, ...)."""


class UnknownNetworkError(ConfigError):
    """The requested network is not one of the built-in ones."""


class ModelImportError(MetaTuneError):
    """A user model (ONNX file, ``module:callable``) could not be loaded or imported."""


class TargetUnavailableError(MetaTuneError):
    """The requested target is not supported by the installed TVM or this machine."""


class WorkDirError(MetaTuneError):
    """The work directory cannot be created or written."""



class WorkDirBusyError(WorkDirError):
    """Another run holds the work dir's lock."""

class DatabaseCorruptError(MetaTuneError):
    """A tuning database file in the work directory cannot be parsed."""


class TuningMemoryError(MetaTuneError):
    """The machine's tuning memory cannot be used (unwritable, or made for another machine)."""


class TuningStalledError(MetaTuneError):
    """Several rounds in a row measured nothing valid: tuning cannot make progress."""


class CheckFailedError(MetaTuneError):
    """The compiled network's output disagrees with the reference implementation."""


class DatasetSettingsError(MetaTuneError):
    """A dataset was measured under other settings (CPU, threads, runner) than this run's."""


class RunnerUnavailableError(MetaTuneError):
    """The measurement runner cannot start: no RPC tracker, or no server under the key."""


class CheckpointError(MetaTuneError):
    """The cost-model checkpoint is missing, unreadable, or made for other graphs."""


class CalibrationError(MetaTuneError):
    """The zero-shot scale cannot be fitted (too few validation samples, a reversed fit)."""


def register_ffi_errors() -> None:
    """Keep these errors' types when they cross TVM's FFI.

    An exception raised in Python code that TVM's C++ calls (a cost model's ``load``, a
    runner, a measure callback) comes back to Python as a ``RuntimeError`` unless its class
    is registered with ``tvm_ffi``; registered, it arrives as itself and the entry points
    print it on one line. Called where TVM is in use already (it imports ``tvm_ffi``);
    calling it again changes nothing.
    """
    import tvm_ffi

    todo = [MetaTuneError]
    while todo:
        cls = todo.pop()
        tvm_ffi.register_error(cls.__name__, cls)
        todo += cls.__subclasses__()


def one_line(text: str, limit: int = 300) -> str:
    """The first non-blank line of ``text`` (an exception's message from TVM or torch, which
    may run over many lines), cut to ``limit`` characters."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return (lines[0] if lines else "")[:limit]
