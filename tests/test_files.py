"""Files written whole or not at all (metatune.files)."""

from __future__ import annotations

import json

import pytest

from metatune.files import write_json_atomic, write_text_atomic


def test_a_failed_write_leaves_the_old_file_whole(tmp_path):
    path = str(tmp_path / "run.json")
    write_json_atomic(path, {"best": 1.0}, indent=2, newline=True)
    assert open(path).read().endswith("}\n") and json.load(open(path)) == {"best": 1.0}
    with pytest.raises(TypeError):
        write_json_atomic(path, {"best": object()})  # not JSON: nothing written
    assert json.load(open(path)) == {"best": 1.0}
    write_text_atomic(path, "a\nb\n", fsync=True)
    assert open(path).read() == "a\nb\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # no .tmp left
    # another process's half-written copy of the same file is not this one's
    (tmp_path / "run.json.0.tmp").write_text("{half")
    write_json_atomic(path, {"best": 2.0})
    assert json.load(open(path)) == {"best": 2.0}
    assert (tmp_path / "run.json.0.tmp").read_text() == "{half"
