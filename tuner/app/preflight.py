"""Checks made before anything slow: the inputs, and whether a work dir may be resumed.

``check_inputs`` refuses an unknown network, a missing ONNX file or an unloadable
checkpoint before the work dir is created and the network imported. ``check_resume``
stops a run whose cost model, search or target differ from those that made the
measurements already in the work dir: the budget counts those measurements, so the run
would otherwise tune nothing and label someone else's results with its own preset.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace
from typing import Any

from metatune.config import repo_relative
from metatune.dataset import as_split_dirs
from metatune.device import resolve_device
from metatune.errors import ConfigError, ModelImportError
from metatune.files import write_json_atomic
from tuner.app.config import TuneConfig, preset_for
from tuner.engine.database import RECORD_FILE, describe_target, target_counts, target_key
from tuner.engine.rpc import check_tracker

SETTINGS_FILE = "settings.json"

logger = logging.getLogger(__name__)


def with_model_sources(cfg: TuneConfig, target_info) -> TuneConfig:
    """The configuration with the cost model's checkpoints and xgb-xfer's data named: the
    ones a run left ``None`` become the target's own platform's, else the shipped ones of
    its kind (:mod:`tuner.app.checkpoints`; xgb-xfer's data: the splits the default
    checkpoint was trained on), and a ``None`` ensemble the checkpoint's seeds
    (:meth:`tuner.models.params.MetaTuneModelConfig.members`), so the report records what
    was used.

    Raises:
        ConfigError: Nothing of the target's kind ships, and none was named.
    """
    from tuner.app.checkpoints import default_checkpoint_for, default_xfer_data

    m, x = cfg.metatune, cfg.xfer
    if cfg.cost_model == "metatune" and not m.checkpoint and not m.from_scratch:
        m = replace(m, checkpoint=default_checkpoint_for(target_info.target, m.graph))
    if cfg.cost_model == "metatune" and m.ensemble is None:
        m = replace(m, ensemble=m.members(m.checkpoint))  # its seeds, named
    if cfg.cost_model == "xgb-xfer" and not x.data:
        x = replace(x, data=default_xfer_data(target_info.target))
    return replace(cfg, metatune=m, xfer=x)


def check_inputs(cfg: TuneConfig, target_info) -> None:
    """Refuse bad inputs that would otherwise surface after minutes of work.

    Args:
        cfg: The tune configuration.
        target_info: The resolved :class:`tuner.engine.targets.TargetInfo`.

    Raises:
        UnknownNetworkError: ``network`` is not built in (and no ONNX file or model given).
        ModelImportError: The ONNX file does not exist.
        tuner.models.cost_model.CheckpointError: A MetaTune checkpoint (or one of
            ``metatune.ensemble``) is missing or unloadable.
        ConfigError: No checkpoint named, and none of the target's kind ships.
        RunnerUnavailableError: ``runner.kind=rpc`` (or ``evaluate.runner=rpc``) without a
            tracker or a server under the key.
        ConfigError: A target of another CPU triple measured or timed here.
        DeviceUnavailableError: ``device`` names a GPU torch does not see.
    """
    from tuner.engine.networks import builtin_module

    if cfg.onnx:
        if not os.path.isfile(cfg.onnx):
            raise ModelImportError(f"--onnx {cfg.onnx!r}: no such file")
    elif not cfg.model and cfg.network is not None:
        from tuner.engine.networks import BUILTIN_NETWORKS

        if cfg.network not in BUILTIN_NETWORKS:
            builtin_module(cfg.network)  # raises UnknownNetworkError with the choices
    m = cfg.metatune
    if cfg.cost_model == "metatune" and not m.from_scratch:
        from tuner.models.trained import load_net

        named = with_model_sources(cfg, target_info).metatune
        for checkpoint in [named.checkpoint, *named.ensemble]:
            load_net(checkpoint, graph=m.graph)
    resolve_device(cfg.device)
    timed = cfg.evaluate.where(cfg.runner) if cfg.evaluate.enabled else None
    _check_cross(cfg, target_info, timed)
    if "rpc" in (cfg.runner.kind, timed):
        check_tracker(cfg.runner.rpc)


def _check_cross(cfg: TuneConfig, target_info, timed: str | None) -> None:
    """Refuse to run here what is built for another CPU triple (``mtriple``): its
    candidates and its network run on the device, over RPC.

    Raises:
        ConfigError: ``runner.kind`` or the evaluation (``timed``) is local.
    """
    from tuner.engine.targets import is_cross

    if not is_cross(target_info.target):
        return
    triple = target_info.target.attrs.get("mtriple")
    if cfg.runner.kind == "local":
        raise ConfigError(f"--target is for {triple}, which this machine does not run: "
                          "measure on the device (runner.kind=rpc, a server there)")
    if timed == "local":
        raise ConfigError(f"evaluate.runner=local with a target for {triple}: time it on the "
                          "device (evaluate.runner=rpc or null) or pass evaluate.enabled=false")


#: The layout of work dirs whose settings predate the layout's record (the default then).
OLD_LAYOUT = "NCHW"


def model_sources(cfg: TuneConfig) -> list[str] | None:
    """What the cost model starts from: MetaTune's checkpoint and its ensemble's, or
    xgb-Xfer's training splits, as committed files write paths (``None``: nothing, e.g. a
    model from scratch). Run on a configuration :func:`with_model_sources` named them."""
    m = cfg.metatune
    if cfg.cost_model == "metatune" and not m.from_scratch and m.checkpoint:
        return [repo_relative(p) for p in [m.checkpoint, *(m.ensemble or [])]]
    if cfg.cost_model == "xgb-xfer" and cfg.xfer.data:
        return [repo_relative(p) for p in as_split_dirs(cfg.xfer.data)]
    return None


def run_settings(cfg: TuneConfig, target_info) -> dict[str, Any]:
    """What makes measurements comparable: cost model, search, graph, target and the
    convolutions' data layout, and what the model starts from (``model``: recorded, not
    required to match; the plain dict written to ``settings.json``)."""
    target = target_info.target
    mcpu = target.attrs.get("mcpu") if hasattr(target, "attrs") else None
    return {
        "cost_model": cfg.cost_model,
        "search": cfg.search,
        "graph": cfg.metatune.graph if cfg.cost_model == "metatune" else None,
        "target": {"kind": target_info.kind, "mcpu": str(mcpu) if mcpu else None},
        "layout": cfg.layout,
        "precision": cfg.precision,
        "model": model_sources(cfg),
        "tvm": tvm_version(),
    }


def tvm_version() -> str:
    """The TVM the measurements are made with (its schedules and timings are its own)."""
    import tvm

    return str(tvm.__version__)


def check_records_target(work_dir: str, target_info) -> None:
    """Refuse a work dir whose database holds records measured for another target (e.g. a
    database copied from another machine's work dir): they would count toward the budget
    and seed the search and the best latencies with another CPU's timings.

    Raises:
        ConfigError: One line naming both targets and how many records are foreign.
    """
    ours = target_key(target_info.target.export())
    counts = target_counts(work_dir)
    foreign = {key: n for key, n in counts.items() if key != ours}
    if not foreign:
        return
    key, n = max(foreign.items(), key=lambda item: item[1])
    raise ConfigError(
        f"work dir {work_dir} holds {sum(foreign.values())} of its {sum(counts.values())} "
        f"records measured for {describe_target(key)}"
        + (f" (and {len(foreign) - 1} other target(s))" if len(foreign) > 1 else "")
        + f", not for this run's {describe_target(ours)}: they would count toward the budget "
        "and their timings would seed the search; pass --work-dir with a new directory, or "
        f"--target for the CPU they were measured on")


def _read_json(path: str) -> dict[str, Any] | None:
    """A JSON object file, or ``None`` when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_settings(work_dir: str) -> dict[str, Any] | None:
    """The work dir's ``settings.json`` (:func:`run_settings`, written by
    :func:`check_resume`), or ``None`` when it has none (or an unreadable one)."""
    return _read_json(os.path.join(work_dir, SETTINGS_FILE))


def _stored_settings(work_dir: str) -> dict[str, Any] | None:
    """The settings of the run that made the work dir (``settings.json``, else the
    ``report.json`` of a run that predates it), or ``None``."""
    if (settings := read_settings(work_dir)) is not None:
        return settings
    data = _read_json(os.path.join(work_dir, "report.json"))
    if data is not None and "cost_model" in data and "search" in data:
        return {"cost_model": data["cost_model"], "search": data["search"],
                "graph": data.get("graph"), "target": None}
    return None


def _describe(settings: dict[str, Any]) -> str:
    name = preset_for(settings["cost_model"], settings["search"], settings.get("graph"))
    text = f"preset {name}" if name else (f"cost_model={settings['cost_model']} "
                                          f"search={settings['search']}")
    target = settings.get("target")
    if target:
        text += f" on {target['kind']}" + (f" -mcpu={target['mcpu']}" if target["mcpu"] else "")
    text += f", layout={settings.get('layout') or OLD_LAYOUT}"
    return text + (f", precision={settings['precision']}"
                   if settings.get("precision", "fp32") != "fp32" else "")


def check_resume(work_dir: str, cfg: TuneConfig, target_info, record: bool = True) -> None:
    """Refuse to resume a work dir measured with other settings; record this run's.

    Records measured for another target are refused whatever ``settings.json`` says
    (:func:`check_records_target`), and so are measurements of another TVM version (once
    ``settings.json`` names one).

    A run whose cost model starts from other checkpoints (or other xgb-Xfer data) than the
    one before resumes with a warning: the measurements are valid either way, only the
    search that follows differs. ``settings.json`` then records this run's model (a work
    dir from before models were recorded gets this run's, with no warning). The model's
    other settings (its adaptation) are not compared.

    Args:
        work_dir: The (locked) work directory.
        cfg: The tune configuration.
        target_info: The resolved :class:`tuner.engine.targets.TargetInfo`.
        record: Write this run's settings to ``settings.json`` (``False``: only check, as
            before the work dir is locked).

    Raises:
        ConfigError: The work dir holds measurements made with another cost model,
            search, graph, target, layout or TVM version.
    """
    new = run_settings(cfg, target_info)
    records = os.path.join(work_dir, RECORD_FILE)
    has_records = os.path.exists(records) and os.path.getsize(records) > 0
    if has_records:
        check_records_target(work_dir, target_info)
    old = _stored_settings(work_dir) if has_records else None
    if old is not None and old.get("tvm") and old["tvm"] != new["tvm"]:
        raise ConfigError(
            f"work dir {work_dir} holds measurements made with TVM {old['tvm']}, this is TVM "
            f"{new['tvm']}: another version's schedules and timings are not comparable, and "
            "the budget would count them; pass --work-dir with a new directory")
    if old is not None:
        keys = ["cost_model", "search", "graph"] + (["target"] if old.get("target") else [])
        if (any(old.get(k) != new[k] for k in keys)
                or (old.get("layout") or OLD_LAYOUT) != new["layout"]
                or (old.get("precision") or "fp32") != new["precision"]):
            raise ConfigError(
                f"work dir {work_dir} holds measurements made with {_describe(old)}, and "
                f"the budget counts them: this run ({_describe(new)}) would tune nothing "
                "of its own; pass --work-dir with a new directory (or the same settings "
                "to resume)")
        if record and "model" in old and old["model"] != new["model"]:
            logger.warning(
                "work dir %s was tuned with a cost model started from %s; this run's starts "
                "from %s: the measurements made are kept and count toward the budget, the "
                "search goes on with this run's model", work_dir,
                " + ".join(old["model"] or ["nothing"]), " + ".join(new["model"] or ["nothing"]))
        if old.get("target") and old.get("model") == new["model"] and old.get("tvm"):
            return
        if not old.get("tvm"):  # records from before the version was kept: not made up now
            new["tvm"] = None
    if record:
        write_json_atomic(os.path.join(work_dir, SETTINGS_FILE), new, indent=1)
