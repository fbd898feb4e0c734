"""Configuration plumbing shared by the entry points: schema + YAML + dotlist overrides.

Each entry point has one typed schema: a dataclass whose fields are its keys, with the one
copy of their defaults, that validates itself in ``__post_init__``. :func:`merge_config`
merges the schema, a YAML file and ``key=value`` overrides with OmegaConf and converts the
result once with ``OmegaConf.to_object``: the dataclasses are constructed bottom-up, so
every section is checked when it is made, and the entry point gets typed objects all the
way down. The YAML files list the same defaults as documentation (a test checks that they
agree).

Relative paths, one rule: a relative path in a configuration (a YAML file or the command
line) is relative to the **current working directory**. It is made absolute once, when the
configuration is loaded (:func:`resolve_path`). A path left ``null`` means the
repository's own location (:func:`repo_path`: ``checkpoints/``, ``data/<platform>``,
``work/``, ``runs/``), which does not depend on the current directory; so
``python tune.py --network alexnet`` and ``python train.py`` run the same from any
directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from metatune.errors import ConfigError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The loop-nest graph modes (:mod:`metatune.graph`), and the default one.
GRAPH_MODES = ("plain", "super")
DEFAULT_GRAPH = "super"
#: The platform (target kind and CPU) of the shipped dataset and checkpoints: what
#: ``data_dir`` (train) left ``null`` means, and what a target without data of its own
#: uses (:mod:`tuner.app.checkpoints`).
SHIPPED_DATASET = "llvm-icelake-server"
DEFAULT_DATA_DIR = os.path.join(REPO_ROOT, "data", SHIPPED_DATASET)
#: The platform whose checkpoints a target without checkpoints of its own loads (with
#: their seed siblings, ``metatune.ensemble``): the AMD EPYC's, trained on six splits of
#: three CPUs' data in NCHW and NHWC; chosen on a fourth CPU's validation fold (an Intel
#: Xeon's googlenet convs in NHWC, against the rocketlake and icelake-server ones:
#: ``docs/lab/cost-model/fallback-val-emeraldrapids.md``; until 2026-12-05 the rocketlake Xeon's,
#: ``docs/lab/cost-model/training-data-val-znver4.md``).
FALLBACK_CHECKPOINT = "llvm-znver4"
#: Where caches go when a ``cache_dir`` is left ``null`` (encoded graphs, xgb-xfer's model).
DEFAULT_CACHE_DIR = os.path.join(REPO_ROOT, "work", "cache")

T = TypeVar("T")


def resolve_path(path: str) -> str:
    """The one rule for a path given in a configuration: relative to the current directory.

    Args:
        path: A path from a YAML file or the command line (``~`` is expanded).

    Returns:
        The absolute path.
    """
    return os.path.abspath(os.path.expanduser(str(path)))


def repo_path(*parts: str) -> str:
    """A location inside the repository: what a path setting left ``null`` means."""
    return os.path.join(REPO_ROOT, *parts)


def repo_relative(path: str) -> str:
    """A path as written into committed files: relative to the repository when inside it
    (no machine's directory layout in them), else absolute."""
    rel = os.path.relpath(path, REPO_ROOT)
    return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def check_graph(graph: str, key: str) -> str:
    """A graph mode in its one spelling (lower case).

    Args:
        graph: The configured value.
        key: The key for the message (``graph``, ``metatune.graph``).

    Raises:
        ConfigError: Not ``super`` or ``plain``.
    """
    mode = str(graph).lower()
    if mode not in GRAPH_MODES:
        raise ConfigError(f"{key}={graph!r}: choose super or plain")
    return mode


def merge_config(schema: type[T], yaml_path: str | None, overrides: list[str] | None,
                 what: str, *, implied: Callable[[Any], list[str]] | None = None) -> T:
    """Merge a structured schema, YAML defaults and dotlist overrides; validate once.

    Args:
        schema: The entry point's dataclass (typed keys, defaults, ``__post_init__``
            checks).
        yaml_path: YAML defaults (``None``: the schema's defaults only).
        overrides: Dotlist overrides such as ``["trials=200", "runner.number=5"]``.
        what: The config's name for messages (``"tune"``, ``"train"``, ``"collect"``).
        implied: Given the merged configuration (an OmegaConf ``DictConfig``, read by
            attribute), more dotlist overrides to apply between the YAML and ``overrides``
            (a preset's settings, which explicit overrides still win over).

    Returns:
        An instance of ``schema`` (dataclass instances all the way down), validated.

    Raises:
        ConfigError: An unknown key, a value of the wrong type (naming the key), or a
            value a schema's ``__post_init__`` refuses.
    """
    from omegaconf import OmegaConf

    if yaml_path:
        _check_yaml_file(yaml_path, what)
    with _one_line_errors(what):
        base = OmegaConf.structured(schema)
        if yaml_path:
            base = OmegaConf.merge(base, OmegaConf.load(yaml_path))
        explicit = OmegaConf.from_dotlist(list(overrides or []))
        cfg = OmegaConf.merge(base, explicit)
        if implied is not None:
            extra = implied(cfg)
            if extra:
                cfg = OmegaConf.merge(base, OmegaConf.from_dotlist(extra), explicit)
        return OmegaConf.to_object(cfg)


def config_from(schema: type[T], values: Mapping[str, Any], what: str) -> T:
    """A schema filled in from a (partial, nested) mapping of its keys, validated.

    For code that builds a configuration without a YAML file or a command line; the
    schema's defaults fill the keys ``values`` leaves out.

    Raises:
        ConfigError: As :func:`merge_config`.
    """
    from omegaconf import OmegaConf

    with _one_line_errors(what):
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema),
                                                   dict(values)))


@contextmanager
def _one_line_errors(what: str) -> Iterator[None]:
    """Turn OmegaConf's errors into a one-line :class:`ConfigError` naming the key."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        yield
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
        from metatune.retired import retired_message

        if (retired := retired_message(key)) is not None:
            raise ConfigError(f"bad {what} config: {retired}") from err
        where = f" (key {key!r})" if key else ""
        raise ConfigError(f"bad {what} config{where}: {str(err).splitlines()[0]}; see "
                          f"configs/{what}.yaml for the keys and their types") from err


def _check_yaml_file(path: str, what: str) -> None:
    """Refuse a config file that is missing, unreadable, not YAML, or not a mapping.

    Raises:
        ConfigError: What is wrong with it, naming the file.
    """
    import yaml

    hint = f"pass --config with a YAML mapping of keys (see configs/{what}.yaml)"
    if os.path.isdir(path):
        raise ConfigError(f"config {path!r} is a directory; {hint}")
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as err:
        raise ConfigError(f"cannot read config {path!r} ({err.strerror}); {hint}") from err
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"config {path!r} is not valid YAML ({first}); {hint}") from err
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"config {path!r} holds a {type(data).__name__}, not a mapping of "
                          f"keys; {hint}")


def platform_name(kind: str, cpu: str | None) -> str:
    """A platform's name, which its dataset and checkpoints carry: the target kind and the
    CPU (or GPU architecture) it compiles for, e.g. ``llvm-icelake-server``."""
    return f"{kind}-{cpu or 'generic'}"


def target_dict(text: str | None) -> dict | None:
    """A target as recorded in a dataset's ``meta.json`` or a checkpoint's platform (TVM's
    JSON text) as a dict with at least ``kind``; ``None`` when absent or unreadable."""
    import json

    try:
        target = json.loads(text) if text else None
    except (TypeError, ValueError):
        return None
    return target if isinstance(target, dict) and "kind" in target else None


def host_data_dir() -> str:
    """The dataset ``train.py`` uses when none is named: this machine's own platform's
    (``data/llvm-<this CPU>``, as ``collect.py run`` names it) when it has been collected,
    else the shipped one."""
    from tvm.target import codegen

    own = repo_path("data", platform_name("llvm", str(codegen.llvm_get_system_cpu() or "")))
    return own if os.path.isfile(os.path.join(own, "train", "meta.json")) else DEFAULT_DATA_DIR


def default_checkpoint(dataset: str = SHIPPED_DATASET, *, graph: str = DEFAULT_GRAPH) -> str:
    """The checkpoint ``train.py`` writes by default: ``checkpoints/<dataset>-<graph>.ckpt``.

    Args:
        dataset: The dataset directory name (``llvm-icelake-server`` for
            ``data/llvm-icelake-server``).
        graph: ``super`` or ``plain``.
    """
    return repo_path("checkpoints", f"{dataset}-{graph}.ckpt")


def seed_siblings(checkpoint: str) -> list[str]:
    """The checkpoints trained as ``checkpoint`` was from other seeds, kept beside it as
    ``<name>-seed<N>.ckpt`` (``python train.py seed=N out=...``), in ``N``'s order."""
    stem, ext = os.path.splitext(checkpoint)
    folder = os.path.dirname(stem) or "."
    pattern = re.compile(re.escape(os.path.basename(stem)) + r"-seed([0-9]+)" + re.escape(ext))
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = [(int(m.group(1)), n) for n in names if (m := pattern.fullmatch(n))]
    return [os.path.join(folder, n) for _, n in sorted(found)]
