"""A dataset on disk: its packed splits, each split's ``meta.json`` and the checks that keep
a split's samples comparable (one set of measurement settings, the networks it was
collected from).

A split's working copy (a MetaSchedule JSON database) lives in ``work_dir``; it is packed
as ``.json.gz`` into ``out/<split>`` after every workload, with a ``meta.json`` saying
what, where and how it was measured, and unpacked again when a run resumes without it.
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import sys
from typing import Any

from metatune.errors import DatasetSettingsError
from metatune.files import write_json_atomic
from metatune.records import RECORD_FILE, WORKLOAD_FILE, read_meta
from tuner.app.collect_config import CollectConfig
from tuner.app.collect_plan import Entry, networks_setting, split_layout

logger = logging.getLogger(__name__)

#: The log of a split's failed measurements, packed beside its records.
ERROR_FILE = "errors.jsonl"


def unpack(out_dir: str, work_dir: str) -> None:
    """Restore the working copy from the packed ``.json.gz`` files when it is missing."""
    for name in (WORKLOAD_FILE, RECORD_FILE, ERROR_FILE):
        packed, plain = os.path.join(out_dir, name + ".gz"), os.path.join(work_dir, name)
        if not os.path.exists(plain) and os.path.exists(packed):
            with gzip.open(packed, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)


def pack(work_dir: str, out_dir: str) -> None:
    """Compress the working copy into ``out_dir`` (atomically, file by file)."""
    os.makedirs(out_dir, exist_ok=True)
    for name in (WORKLOAD_FILE, RECORD_FILE, ERROR_FILE):
        plain = os.path.join(work_dir, name)
        if not os.path.exists(plain):
            continue
        tmp = os.path.join(out_dir, name + ".gz.tmp")
        with open(plain, "rb") as src, gzip.GzipFile(tmp, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        os.replace(tmp, os.path.join(out_dir, name + ".gz"))


def split_settings(settings: dict[str, Any], split: str) -> dict[str, Any]:
    """A split's measurement settings: an NHWC split records its layout too (the NCHW
    splits, collected before layouts were a choice, record none)."""
    return {**settings, "layout": "NHWC"} if split_layout(split) == "NHWC" else settings


def check_settings(split_dir: str, settings: dict[str, Any]) -> None:
    """Refuse to add samples to a split measured under other settings.

    Raises:
        DatasetSettingsError: What differs, and where to collect instead.
    """
    if (meta := read_meta(split_dir)) is None:
        return
    recorded = meta.get("settings")
    hint = ("collect into another out= directory (datasets are kept per platform, "
            "data/<target>-<cpu>), or move this one away to start over")
    if recorded is None:
        raise DatasetSettingsError(f"{split_dir} records no measurement settings (a dataset "
                                   f"from before they were recorded); {hint}")
    diffs = [f"{k}: {recorded.get(k)!r} there, {v!r} now" for k, v in settings.items()
             if recorded.get(k) != v]
    if diffs:
        raise DatasetSettingsError(f"{split_dir} was measured with other settings "
                                   f"({'; '.join(diffs)}); {hint}")


def _measured_any(split_dir: str, work_dir: str) -> bool:
    """Whether a split holds any measurement, packed (``split_dir``) or in its working
    copy (``work_dir``: the round in flight when a run stopped)."""
    packed = os.path.join(split_dir, RECORD_FILE + ".gz")
    if os.path.exists(packed):
        with gzip.open(packed, "rt", encoding="utf-8") as f:
            if any(line.strip() for line in f):
                return True
    plain = os.path.join(work_dir, RECORD_FILE)
    return os.path.exists(plain) and os.path.getsize(plain) > 0


def check_networks(cfg: CollectConfig, split: str) -> None:
    """Refuse to resume a split without networks it was collected from (their workloads
    would drop out of its ``meta.json``); adding networks is logged. A split begun but
    with nothing measured yet takes this run's networks.

    Raises:
        DatasetSettingsError: The networks left out, and how to go on.
    """
    split_dir = os.path.join(cfg.out, split)
    if not (key := networks_setting(split)) or (meta := read_meta(split_dir)) is None:
        return
    if (recorded := meta.get("networks")) is None:  # collected before they were recorded
        return
    if not _measured_any(split_dir, os.path.join(cfg.work_dir or "", split)):
        return  # begun, nothing measured: this run's networks replace the recorded ones
    networks = getattr(cfg, key)
    if missing := [n for n in recorded if n not in networks]:
        raise DatasetSettingsError(
            f"{split_dir} was collected from {', '.join(missing)} too, which "
            f"{key}= now leaves out: add {'it' if len(missing) == 1 else 'them'} back, or "
            "collect into another out= directory")
    if added := [n for n in networks if n not in recorded]:
        logger.info("%s: adding the conv tasks of %s", split_dir, ", ".join(added))


def write_meta(cfg: CollectConfig, split: str, entries: list[Entry], *, info, machine: dict,
               settings: dict) -> None:
    """Write ``<out>/<split>/meta.json``: what each workload is, where and how measured.

    Args:
        cfg: The collect configuration.
        split: one of :data:`tuner.app.collect_config.SPLITS`.
        entries: The split's workloads.
        info: The resolved target.
        machine: :func:`metatune.provenance.machine_info` (now).
        settings: :func:`tuner.app.collect.measurement_settings` (checked against the
            file's before).
    """
    from tvm_ffi import structural_hash

    out = os.path.join(cfg.out, split)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "meta.json")
    created = (read_meta(out) or {}).get("created", machine["date"])
    meta = {
        "split": split,
        **({"networks": list(getattr(cfg, key))} if (key := networks_setting(split)) else {}),
        "target": str(info.target),
        "target_description": info.description,
        "machine": machine,
        "settings": settings,
        "created": created,
        "updated": machine["date"],
        "command": "python " + " ".join(sys.argv),
        "sampling": "random traces of MetaSchedule's post-order-apply design space "
                    "(ReplayTrace), LocalRunner "
                    f"number={cfg.runner.number} repeat={cfg.runner.repeat} "
                    f"min_repeat_ms={cfg.runner.min_repeat_ms}; generated workloads "
                    "fused by the tuner's own pipeline (epilogue, layout-free weights)",
        "workloads": [{"name": e.name, "kind": e.kind, "samples": e.samples,
                       "shash": str(structural_hash(e.mod)), **e.info} for e in entries],
    }
    write_json_atomic(path, meta, indent=1)
