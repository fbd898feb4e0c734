"""``backend="metatune"`` for ``torch.compile``, registered by name without loading anything.

The installed package declares the backend as a ``torch_dynamo_backends`` entry point
(``pyproject.toml``), which torch looks up by itself. For a checkout used without
installing it, ``import tuner`` registers the same backend with
``torch._dynamo``'s ``register_backend`` — when ``torch._dynamo`` is loaded already, else
as soon as it is (it takes over a second to import, so ``import tuner`` never imports it).
Either way the backend's module (:mod:`tuner.app.dynamo`, which loads TVM) is imported on
the first compilation, by the name below, not here.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import logging
import sys

from metatune.errors import one_line

#: The backend's name and where it lives (the entry point of ``pyproject.toml`` says the same).
BACKEND_NAME = "metatune"
BACKEND = "tuner.app.dynamo:metatune_backend"
_REGISTRY = "torch._dynamo.backends.registry"

logger = logging.getLogger("metatune")
_warned = False


def metatune(gm, example_inputs, **kwargs):
    """The backend, loaded on its first call (see :func:`tuner.app.dynamo.metatune_backend`)."""
    module, _, name = BACKEND.partition(":")
    return getattr(importlib.import_module(module), name)(gm, example_inputs, **kwargs)


def _not_registered(err: Exception) -> None:
    """Say once why the backend could not be registered by name (``import tuner`` and
    torch's own import go on: the entry point of an installed package still works)."""
    global _warned
    if _warned:
        return
    _warned = True
    logger.warning("torch.compile backend %r is not registered by name (%s: %s): install the "
                   "package (pip install -e .) for its entry point, or pass "
                   "backend=tuner.registration.metatune", BACKEND_NAME, type(err).__name__,
                   one_line(str(err), 200))


def _register(registry) -> None:
    """Register :func:`metatune` with torch's backend registry, unless the name is known
    there already: registered, or found as an entry point (torch loads that one itself, and
    refuses a second registration of the name while it does)."""
    if BACKEND_NAME in getattr(registry, "_COMPILER_FNS", {}) \
            or getattr(registry, "_BACKENDS", {}).get(BACKEND_NAME):
        return
    registry.register_backend(compiler_fn=metatune, name=BACKEND_NAME)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``torch._dynamo.backends.registry`` is imported, it has
    the module's own loader run the module and then registers the backend."""

    def __init__(self) -> None:
        self.searching = False

    def find_spec(self, fullname, path, target=None):
        if fullname != _REGISTRY or self.searching:
            return None
        self.searching = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.searching = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module) -> None:
            run(module)
            try:
                _register(module)
            except Exception as err:  # never break torch's import: said once, not raised
                _not_registered(err)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    """Register the backend now if torch's registry is loaded, else when it is."""
    registry = sys.modules.get(_REGISTRY)
    if registry is not None:
        try:
            _register(registry)
        except Exception as err:  # a torch whose registry differs: said once, not raised
            _not_registered(err)
    elif not any(isinstance(f, _RegisterOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterOnImport())
