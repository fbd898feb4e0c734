"""tune.py's evaluation on an RPC server holds one session at a time: with one server under
the key, the untuned build's session would otherwise wait for the tuned build's to time out."""

from __future__ import annotations

import numpy as np

import tuner.app.run as run
from tuner.app.config import EvaluateConfig
from tuner.engine.timing import Latency


class _Remote:
    """A stand-in for :class:`tuner.engine.remote.RemoteNetwork` that logs its session."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log
        log.append(f"open {name}")

    def run(self, x: np.ndarray) -> np.ndarray:
        return x

    def timer(self, x: np.ndarray):
        return lambda windows, min_ms: [1.0] * windows

    def time(self, x: np.ndarray, repeat: int, min_ms: int) -> Latency:
        return Latency(2.0, [2.0] * repeat)

    def close(self) -> None:
        self.log.append(f"close {self.name}")


class _Network:
    relax_mod = None
    torch_module = None

    def example_input(self) -> np.ndarray:
        return np.zeros((1, 2), dtype="float32")

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x


class _Target:
    target = None
    device_type = "cpu"
    num_cores = 2


def test_each_remote_session_ends_before_the_next_opens(monkeypatch):
    monkeypatch.setattr(run, "build_network", lambda *a, **k: "tuned")
    monkeypatch.setattr(run, "build_untuned", lambda *a, **k: "untuned")
    log: list[str] = []
    report = {"latency_ms": {}}
    ecfg = EvaluateConfig(repeat=2, rounds=1, min_repeat_ms=1, untuned=True, untuned_repeat=1)
    run._evaluate(report, _Network(), _Target(), None, ecfg, run.Lowering(), "rpc test",
                  lambda executable: _Remote(executable, log))
    assert log == ["open tuned", "close tuned", "open untuned", "close untuned"]
    assert report["latency_ms"] == {"tuned": 1.0, "untuned": 2.0}
    assert report["timing"]["where"] == "rpc test"
