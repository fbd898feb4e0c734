"""Where the tuning-speed benchmark (:mod:`bench.tuning_speed`) keeps its records, and
reading them back: one rung record per network, preset and seed
(``<runs>/<platform>/<network>-<preset>-s<seed>.json``, its ``rungs`` by budget) and one
side-by-side timing per network (``<network>-timing.json``)."""

from __future__ import annotations

import json
import os

#: The preset that tunes as a user's first ``tune.py`` run: the default, with the tuning
#: memory on but empty (the work dir's own) and schedule transfer from the shipped datasets.
FIRST_RUN = "first-run"


def ms_text(v: float | None) -> str:
    """A latency in milliseconds as the page writes it (``-``: none)."""
    return "-" if v is None else (f"{v:.2f}" if v < 10 else f"{v:.1f}")


def slug(network: str) -> str:
    """A network's name in file names: ``torchvision.models:regnet_y_400mf`` ->
    ``regnet-y-400mf``, ``resnet-18`` unchanged."""
    name = network.split(":")[-1]
    return "".join(c if c.isalnum() or c == "-" else "-" for c in name.lower())


def record_path(runs: str, platform: str, network: str, preset: str, seed: int) -> str:
    """The rung record of one network, preset and seed."""
    return os.path.join(runs, platform, f"{slug(network)}-{preset}-s{seed}.json")


def timing_path(runs: str, platform: str, network: str) -> str:
    """The side-by-side timing record of one network."""
    return os.path.join(runs, platform, f"{slug(network)}-timing.json")


def artifact_key(preset: str, seed: int, budget: int) -> str:
    """A rung build's name in the timing record: ``xgb/s0/128``."""
    return f"{preset}/s{seed}/{budget}"


def read_json(path: str) -> dict | None:
    """A JSON record, or ``None`` when there is none."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def rung_records(runs: str, platform: str, network: str) -> list[dict]:
    """Every rung record (one per preset and seed) of ``network`` on ``platform``."""
    folder = os.path.join(runs, platform)
    out = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.startswith(slug(network) + "-") and not name.endswith("-timing.json"):
            record = read_json(os.path.join(folder, name))
            if record and record.get("network") == network:
                out.append(record)
    return out
