"""A compiled network run and timed on a server behind a TVM RPC tracker.

The library is uploaded and loaded by the server (a cross target's ``.tar`` is linked
there), and the Relax VM is driven through its stateful API (``set_input``, then
``invoke_stateful`` and ``get_outputs``): a function that returns a tuple cannot be called
or timed over RPC directly. Only ``tvm`` and numpy run on the server.

Used by ``tune.py``'s final evaluation with ``evaluate.runner=rpc``
(:func:`tuner.app.artifact_timing.loaded_on`) and by ``export.py --time --runner rpc``
(:func:`tuner.app.artifact_timing.time_artifact`).
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence

import numpy as np

from metatune.errors import RunnerUnavailableError, one_line
from tuner.engine.evaluate import first_output
from tuner.engine.rpc import RPCSettings
from tuner.engine.timing import Latency, WindowTimer

FUNCTION = "main"
#: The shortest server-side limit of an evaluation session: it uploads, loads, checks and
#: times a whole network (minutes on a slow device), where a measurement session's limit
#: (``runner.rpc.session_timeout_sec``) is sized for one candidate.
EVALUATION_SESSION_SEC = 600


def rpc_where(rpc: RPCSettings) -> str:
    """Where a timing over RPC ran, for reports: ``rpc <key>@<host>:<port>``."""
    return f"rpc {rpc.key}@{rpc.tracker_host}:{rpc.tracker_port}"


def stateful_timer(vm, device, inputs: Sequence, function: str = FUNCTION) -> WindowTimer:
    """A window timer (:mod:`tuner.engine.timing`) of the VM's ``function`` on ``inputs``
    (TVM tensors on ``device``), through the stateful API, which works over RPC: the time
    evaluator's windows, each calling it back to back for at least ``min_window_ms``."""
    vm.set_input(function, *inputs)

    def windows(count: int, min_window_ms: float) -> list[float]:
        timer = vm.time_evaluator("invoke_stateful", device, number=1, repeat=count,
                                  min_repeat_ms=int(math.ceil(min_window_ms)))
        return [r * 1e3 for r in timer(function).results]

    return windows


class RemoteNetwork:
    """A library loaded into a Relax VM on a server under ``rpc.key``, run and timed there.

    Args:
        library: The exported library (``.so``, or ``.tar`` for a cross target).
        device_type: ``"cpu"``, ``"cuda"``, ...: the device on the server.
        rpc: The tracker and key (``runner.rpc``).

    Raises:
        RunnerUnavailableError: No tracker, no free server under the key, or the server
            cannot load the library; one line saying which.
    """

    def __init__(self, library: str, device_type: str, rpc: RPCSettings) -> None:
        import tvm
        from tvm import rpc as tvm_rpc

        self.where = rpc_where(rpc)
        at = f"key {rpc.key!r} of the tracker {rpc.tracker_host}:{rpc.tracker_port}"
        try:
            tracker = tvm_rpc.connect_tracker(rpc.tracker_host, rpc.tracker_port)
            timeout = max(int(rpc.session_timeout_sec or 0), EVALUATION_SESSION_SEC)
            self.session = tracker.request(rpc.key, priority=1, session_timeout=timeout)
        except Exception as err:  # TVM raises its own types (and TimeoutError) here
            raise RunnerUnavailableError(
                f"no RPC server to time on ({at}: {one_line(err, 160)}); start a tracker and "
                "a server (README: Measuring on other machines)") from err
        try:
            self.session.upload(library)
            module = self.session.load_module(os.path.basename(library))
            self.device = self.session.device(device_type, 0)
            self.vm = tvm.runtime.vm.VirtualMachine(module, self.device)
        except Exception as err:  # the server's own errors come back as TVM errors
            raise RunnerUnavailableError(f"the RPC server ({at}) cannot load "
                                         f"{os.path.basename(library)} ({one_line(err, 200)})"
                                         ) from err

    def close(self) -> None:
        """End the session, so that the server goes back to the tracker (with one server
        under the key, the next build's session waits for this one to end)."""
        self.vm = self.device = None
        self.session = None

    def _tensors(self, arrays: Sequence[np.ndarray]) -> list:
        import tvm

        return [tvm.runtime.tensor(a, self.device) for a in arrays]

    def run(self, *arrays: np.ndarray) -> np.ndarray:
        """Run ``main`` once on the server; its first output, copied back."""
        self.vm.set_input(FUNCTION, *self._tensors(arrays))
        self.vm.invoke_stateful(FUNCTION)
        return first_output(self.vm.get_outputs(FUNCTION))

    def timer(self, *arrays: np.ndarray) -> WindowTimer:
        """A window timer of ``main`` on ``arrays``, timed on the server
        (:func:`stateful_timer`)."""
        return stateful_timer(self.vm, self.device, self._tensors(arrays))

    def time(self, x: np.ndarray, repeat: int, min_repeat_ms: int) -> Latency:
        """Median latency of ``repeat`` windows on the server, each at least
        ``min_repeat_ms`` long."""
        runs = self.timer(x)(repeat, min_repeat_ms)
        return Latency(statistics.median(runs), runs)
