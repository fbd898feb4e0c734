"""Configuration plumbing shared by the entry points: schema + YAML + dotlist overrides."""

from __future__ import annotations

import os
from typing import Any

from metatune.errors import ConfigError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def merge_config(schema: Any, yaml_path: str | None, overrides: list[str] | None,
                 what: str) -> dict[str, Any]:
    """Merge a structured schema, YAML defaults and dotlist overrides into a plain dict.

    Args:
        schema: A dataclass type (typed keys) or ``None`` (the YAML defines the keys).
        yaml_path: YAML defaults (``None``: the schema's defaults only).
        overrides: Dotlist overrides such as ``["trials=200", "runner.number=5"]``.
        what: The config's name for messages (``"tune"``, ``"train"``, ``"collect"``).

    Raises:
        ConfigError: An unknown key or a value of the wrong type, naming the key.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if yaml_path:
        _check_yaml_file(yaml_path, what)
    try:
        cfg = OmegaConf.structured(schema) if schema is not None else None
        if yaml_path:
            loaded = OmegaConf.load(yaml_path)
            if cfg is None:
                OmegaConf.set_struct(loaded, True)
                cfg = loaded
            else:
                cfg = OmegaConf.merge(cfg, loaded)
        if overrides:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
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


def default_checkpoint(dataset: str = "llvm", graph: str = "super") -> str:
    """The checkpoint ``train.py`` writes by default: ``checkpoints/<dataset>-<graph>.ckpt``.

    Args:
        dataset: The dataset directory name (``llvm`` for ``data/llvm``).
        graph: ``super`` or ``plain``.
    """
    return os.path.join(REPO_ROOT, "checkpoints", f"{dataset}-{graph}.ckpt")
