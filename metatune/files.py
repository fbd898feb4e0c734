"""Files written whole or not at all: a reader, or a run killed mid-write, sees the old
file or the new one, never half of one."""

from __future__ import annotations

import json
import os
from typing import Any


def write_text_atomic(path: str, text: str, fsync: bool = False) -> None:
    """Write ``text`` to ``path`` through ``<path>.<pid>.tmp`` and a rename (the process id:
    two processes writing the same file at once each rename a whole one, the last wins).

    Args:
        path: The file to write (its folder must exist).
        text: Its whole content.
        fsync: Flush the data to the disk before the rename (a record a crash must not
            lose, not a page that is written again).
    """
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: str, obj: Any, indent: int | None = None,
                      newline: bool = False) -> None:
    """Write ``obj`` as JSON to ``path`` (:func:`write_text_atomic`), with a final newline
    when ``newline``."""
    write_text_atomic(path, json.dumps(obj, indent=indent) + ("\n" if newline else ""))
