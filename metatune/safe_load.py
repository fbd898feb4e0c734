"""Reading ``torch.save`` files without running code from them.

Every file a user can pass (a ``train.py`` checkpoint, a saved cost model) or the project
caches (encoded graphs) is read with ``torch.load(weights_only=True)``: tensors and plain
containers only, so a crafted pickle (a ``__reduce__`` that runs a command) is refused
before anything in it runs. Saved cost models hold PyG graphs; :func:`load_tensors` with
``graphs=True`` also accepts PyG's graph classes (data holders whose unpickling sets
attributes only), nothing else. A refusal is turned into one line by :func:`load_error`,
which never suggests loading the file with code execution.
"""

from __future__ import annotations

import re
import warnings
from typing import Any


def _graph_classes() -> list[type]:
    """PyG's classes a pickled ``Data`` graph refers to (``Data`` itself is allowed by
    PyG's own import)."""
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    return [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]


def load_tensors(path: str, map_location: Any = "cpu", *, graphs: bool = False) -> Any:
    """``torch.load`` of tensors and plain data only (``weights_only=True``).

    Args:
        path: The file.
        map_location: Where the tensors go (``torch.load``'s argument).
        graphs: Also accept PyG ``Data`` graphs (saved cost models' task states).

    Returns:
        What the file holds.

    Raises:
        pickle.UnpicklingError: It holds other objects (nothing in it was run); any error
            ``torch.load`` raises on an unreadable file. :func:`load_error` words either.
    """
    import torch

    with warnings.catch_warnings():  # a pickle of another protocol is refused all the same
        warnings.filterwarnings("ignore", message="Detected pickle protocol",
                                category=UserWarning)
        if not graphs:
            return torch.load(path, map_location=map_location, weights_only=True)
        with torch.serialization.safe_globals(_graph_classes()):
            return torch.load(path, map_location=map_location, weights_only=True)


def refused(err: BaseException) -> bool:
    """Whether ``err`` is ``torch.load`` refusing what a file holds (``weights_only``)."""
    return "Weights only load failed" in str(err)


def load_error(err: BaseException, limit: int = 200) -> str:
    """One line saying why a file was not loaded.

    A refusal names the object the file asked for and says that nothing ran; PyTorch's
    own text (which suggests loading with code execution) is never repeated.

    Args:
        err: What :func:`load_tensors` (or ``torch.load``) raised.
        limit: Longest text taken from the error itself.
    """
    text = str(err)
    if refused(err):
        found = re.search(r"GLOBAL ([\w.]+)", text)
        what = f"a Python object ({found.group(1)})" if found else "Python objects"
        return (f"it holds {what} besides tensors and plain data, which is never loaded: "
                "nothing in it was run")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(err).__name__}: {(lines[0] if lines else '')[:limit]}"
