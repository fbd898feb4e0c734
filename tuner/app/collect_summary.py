"""A dataset's summary: workloads and valid samples per split and per kind, read without TVM
(``python collect.py summary``), and kept beside the splits as ``summary.json``."""

from __future__ import annotations

import os
from typing import Any

from metatune.files import write_json_atomic
from metatune.records import RECORD_FILE, ReadStats, iter_records, read_meta, read_workload_hashes
from tuner.app.collect_config import SPLITS


def summarize(out_dir: str, work_dir: str | None = None) -> dict[str, Any]:
    """Workloads and valid samples per split and per kind (reads without TVM).

    Args:
        out_dir: The packed dataset directory (``<out>/<split>/...``).
        work_dir: Read the (fresher) working copy instead where it exists.
    """
    summary: dict[str, Any] = {}
    for split in SPLITS:
        if (meta := read_meta(os.path.join(out_dir, split))) is None:
            continue
        src = os.path.join(out_dir, split)
        if work_dir and os.path.exists(os.path.join(work_dir, split, RECORD_FILE)):
            src = os.path.join(work_dir, split)
        by_hash = {w["shash"]: w for w in meta["workloads"]}
        valid: dict[str, int] = {w["name"]: 0 for w in meta["workloads"]}
        failed: dict[str, int] = dict(valid)
        stats = ReadStats()
        try:
            hashes = read_workload_hashes(src)
            for rec in iter_records(src, stats):
                wl = by_hash.get(hashes[rec.workload] if rec.workload < len(hashes) else "")
                if wl is None:
                    continue
                (valid if rec.valid else failed)[wl["name"]] += 1
        except FileNotFoundError:
            pass
        kinds: dict[str, dict[str, int]] = {}
        for w in meta["workloads"]:
            k = kinds.setdefault(w["kind"], {"workloads": 0, "valid_samples": 0,
                                             "failed_samples": 0, "complete_workloads": 0})
            k["workloads"] += 1
            k["valid_samples"] += valid[w["name"]]
            k["failed_samples"] += failed[w["name"]]
            k["complete_workloads"] += int(valid[w["name"]] + failed[w["name"]] >= w["samples"])
        summary[split] = {
            "workloads": len(meta["workloads"]),
            "valid_samples": sum(valid.values()),
            "failed_samples": sum(failed.values()),
            "corrupt_lines": stats.corrupt,
            "min_valid_per_workload": min(valid.values()) if valid else 0,
            "per_kind": kinds,
            "target": meta["target_description"],
            "updated": meta["updated"],
        }
    return summary


def write_summary(out_dir: str) -> dict[str, Any]:
    """:func:`summarize` the dataset and keep it beside its splits (``summary.json``).

    Args:
        out_dir: The packed dataset directory.

    Returns:
        The summary written.
    """
    summary = summarize(out_dir)
    path = os.path.join(out_dir, "summary.json")
    write_json_atomic(path, summary, indent=2, newline=True)
    return summary


def summarize_all(data_root: str) -> dict[str, Any]:
    """:func:`summarize` of every dataset under ``data_root`` (``data/``), by directory name."""
    names = sorted(d for d in os.listdir(data_root)
                   if any(os.path.exists(os.path.join(data_root, d, split, "meta.json"))
                          for split in SPLITS)) if os.path.isdir(data_root) else []
    return {name: summarize(os.path.join(data_root, name)) for name in names}
