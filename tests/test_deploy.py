"""metatune.deploy's input hand-off: tensors TVM takes as they are go through DLPack without a
copy; the others are copied once, on the CPU by numpy on the calling thread, never by a torch
op (a torch copy of an image-sized tensor wakes torch's OpenMP pool, whose worker then spins
on a core the network's TVM threads need: issue 62, mobilenet-v2 1.3x slower)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from metatune.deploy import ALIGNMENT, VMFunction, _to_tvm

SHAPE = (1, 3, 64, 64)  # above torch's parallel grain: a torch copy of it would be parallel


def _unaligned(shape=SHAPE, dtype=np.float32) -> torch.Tensor:
    """A ``torch.from_numpy`` tensor whose data is 4 bytes past a 64-byte boundary."""
    n = int(np.prod(shape))
    raw = np.empty(n * np.dtype(dtype).itemsize + 2 * ALIGNMENT, np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT + 4
    array = raw[start:start + n * np.dtype(dtype).itemsize].view(dtype).reshape(shape)
    array[...] = np.random.default_rng(0).random(shape)
    x = torch.from_numpy(array)
    assert x.data_ptr() % ALIGNMENT
    return x


def _torch_ops(fn) -> set[str]:
    """The aten ops ``fn()`` runs (torch's profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {e.key for e in prof.key_averages()}


def _copies(ops: set[str]) -> set[str]:
    return {op for op in ops if any(w in op for w in ("copy", "clone", "contiguous", "empty"))}


def test_an_aligned_contiguous_input_is_not_copied():
    x = torch.rand(SHAPE)
    assert x.data_ptr() % ALIGNMENT == 0
    t = _to_tvm(x)
    assert torch.from_dlpack(t).data_ptr() == x.data_ptr()


@pytest.mark.parametrize("make", [_unaligned, lambda: torch.rand(1, 64, 64, 3).permute(0, 3, 1, 2)],
                         ids=["unaligned", "not-contiguous"])
def test_a_cpu_input_tvm_cannot_take_is_copied_by_numpy_not_torch(make):
    x = make()
    holder = []
    ops = _torch_ops(lambda: holder.append(_to_tvm(x)))
    assert not _copies(ops), ops
    got = torch.from_dlpack(holder[0])
    assert got.data_ptr() % ALIGNMENT == 0 and got.is_contiguous()
    assert torch.equal(got, x)


def test_bfloat16_falls_back_to_a_torch_copy():
    """numpy has no bfloat16: torch copies it (still aligned, values kept)."""
    x = torch.rand(2, 3, 5, 7).to(torch.bfloat16).permute(0, 1, 3, 2)
    got = torch.from_dlpack(_to_tvm(x))
    assert got.data_ptr() % ALIGNMENT == 0 and torch.equal(got, x)


def test_vm_function_on_an_unaligned_input_runs_no_torch_copy():
    """The whole call: no torch copy of the input, and the output equals the computation."""
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    @tvm.script.ir_module
    class Double:
        @R.function
        def main(x: R.Tensor(SHAPE, "float32")) -> R.Tensor(SHAPE, "float32"):
            return R.add(x, x)

    vm = relax.VirtualMachine(relax.build(Double, target="llvm"), tvm.cpu())
    function = VMFunction(vm, "cpu", inputs=[{"shape": list(SHAPE), "dtype": "float32"}])
    x = _unaligned()
    out = []
    ops = _torch_ops(lambda: out.extend(function(x)))
    assert not _copies(ops), ops
    assert torch.equal(out[0], x + x)
