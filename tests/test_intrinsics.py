"""Only the target's tensor intrinsics are registered, and they are usable."""

from __future__ import annotations

import subprocess
import sys


def test_llvm_loads_cpu_intrinsics_without_cuda():
    code = (
        "import sys, platform; from tuner.engine.intrinsics import load_tensor_intrinsics;"
        "load_tensor_intrinsics(('llvm',));"
        "import tvm.s_tir.tensor_intrin;"  # must now be a no-op
        "assert 'tvm.s_tir.tensor_intrin.cuda' not in sys.modules;"
        "m = platform.machine();"
        "assert m != 'x86_64' or 'tvm.s_tir.tensor_intrin.x86' in sys.modules;"
        "from tvm.s_tir import TensorIntrin;"
        "assert m != 'x86_64' or TensorIntrin.get('dot_16x4_vnni') is not None"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_kind_falls_back_to_everything():
    from tuner.engine.intrinsics import submodules_for

    assert submodules_for("opencl") is None
    assert submodules_for("cuda") == ("cuda",)
