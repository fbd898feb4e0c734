"""One device setting for the learned parts (the cost model's GCN, its online fine-tuning
and the BO search's GP): ``auto``, ``cpu``, ``cuda`` or ``rocm``.

PyTorch built for ROCm exposes AMD GPUs through its ``cuda`` API, so ``rocm`` and ``cuda``
name the same torch device; ``auto`` takes it when torch sees one and the CPU otherwise.
"""

from __future__ import annotations

import torch

from metatune.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda", "rocm")


def check_device_name(name: str, key: str = "device") -> str:
    """The lower-cased device name.

    Raises:
        ConfigError: Not one of :data:`DEVICES`.
    """
    value = str(name).lower()
    if value not in DEVICES:
        raise ConfigError(f"{key}={name!r}: choose one of {', '.join(DEVICES)}")
    return value


def resolve_device(name: str) -> torch.device:
    """The torch device a setting names.

    Raises:
        DeviceUnavailableError: ``cuda`` or ``rocm`` asked for, and torch sees no GPU.
    """
    name = check_device_name(name)
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        build = (f"ROCm {torch.version.hip}" if torch.version.hip else
                 f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only")
        raise DeviceUnavailableError(
            f"device={name}: PyTorch ({torch.__version__}, built for {build}) sees no GPU "
            "here; use device=auto (GPU when there is one, else the CPU) or device=cpu")
    return torch.device("cuda")


def describe(device: torch.device) -> str:
    """``cpu``, or the GPU's name and its backend (for reports and logs)."""
    if device.type != "cuda":
        return "cpu"
    backend = "ROCm" if torch.version.hip else "CUDA"
    return f"{torch.cuda.get_device_name(device)} ({backend})"


class DeviceUnavailableError(ConfigError):
    """The requested accelerator is not available to PyTorch on this machine."""
