"""The on-disk index of a dataset split for schedule transfer (optional; ``work/cache``).

Reading a shipped split for transfer means decompressing its whole record file (about
100 MB of JSON per split) and decoding every workload; the index keeps only what transfer
uses: each workload's signature and its best records (the record lines compressed). It is
keyed by the split's files (names, sizes, times) and its own format, so a changed split or
a new format writes a new file; an unreadable index is ignored (read the split again).
Plain JSON only: nothing in it runs when it is read.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import os

from metatune.dataset import split_fingerprint

logger = logging.getLogger(__name__)

#: Bumped whenever what the index holds changes.
INDEX_FORMAT = "transfer-index-v1"


def index_path(cache_dir: str, split_dir: str, per_workload: int) -> str:
    """The index file of a split in ``cache_dir``."""
    split = os.path.normpath(split_dir)
    name = f"{os.path.basename(os.path.dirname(split))}-{os.path.basename(split)}"
    key = split_fingerprint(split_dir, f"{INDEX_FORMAT}:{per_workload}", with_mtime=True)
    return os.path.join(cache_dir, f"transfer-{name}-{key}.json.gz")


def save_index(path: str, workloads: list[dict]) -> None:
    """Write the index (``workloads``: dicts of ``label``, ``shash``, ``kind``,
    ``extents``, ``seconds``, ``workload`` (its database JSON entry) and ``lines`` (the kept
    record lines, zlib-compressed bytes); other keys are left out) whole or not at all. A
    cache that cannot be written is only a slower next start: a warning, no error."""
    keys = ("label", "shash", "kind", "extents", "seconds", "workload")
    blob = {"format": INDEX_FORMAT, "workloads": [
        {**{k: w[k] for k in keys},
         "lines": [base64.b64encode(x).decode("ascii") for x in w["lines"]]}
        for w in workloads]}
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as f:
            json.dump(blob, f)
        os.replace(tmp, path)
    except OSError as err:
        logger.warning("schedule transfer: the index %s was not written (%s)", path, err)
        if os.path.exists(tmp):
            os.remove(tmp)


def load_index(path: str) -> list[dict] | None:
    """The workloads of an index (as :func:`save_index` takes them), or ``None`` when there
    is none or it cannot be read as one."""
    if not os.path.exists(path):
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            blob = json.load(f)
        if blob.get("format") != INDEX_FORMAT:
            return None
        return [dict(w, lines=[base64.b64decode(x) for x in w["lines"]])
                for w in blob["workloads"]]
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError) as err:
        logger.info("schedule transfer: the index %s is not used (%s)", path, err)
        return None
