"""Every fault of issues 16 and 63 injected into real tune.py / train.py runs (``bench.faults``)."""

from __future__ import annotations

import os
import shutil

import pytest

from bench import faults

NEEDS_ROOT = {"disk-full", "read-only"}  # a tmpfs, chattr +i
# Item 5 (the exact budget) is the scheduler change's (issue 12 work).
ROWS = [key for key in faults.ROWS if key != "budget"]


@pytest.mark.slow
@pytest.mark.parametrize("key", ROWS)
def test_fault(key, tmp_path):
    if key in NEEDS_ROOT and (os.geteuid() != 0 or not shutil.which("chattr")):
        pytest.skip("needs root (mount, chattr)")
    saw, before, after, passed = faults.ROWS[key][1](str(tmp_path))
    assert passed, f"{saw} | records before {before}, after {after}"
