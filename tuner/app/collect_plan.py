"""What a split of the dataset holds: the workloads to measure, each with the samples wanted.

``train`` and ``train-nhwc`` hold generated workloads (:mod:`metatune.workloads`), each
the fused function the tuner's own pipeline makes of it; ``train-transformer`` the same of
the transformer kinds (:mod:`metatune.workloads_transformer`); ``heldout`` holds the conv tasks
of the four networks, never trained on; the network training splits
(:data:`tuner.app.collect_config.NETWORK_SPLITS`) hold the conv tasks of other networks,
every held-out task and every task of the network splits before them left out. A
``-nhwc`` split holds the same in NHWC, ``tune.py``'s default layout.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from metatune.workloads import nhwc_workloads, training_workloads
from metatune.workloads_transformer import transformer_workloads
from tuner.app.collect_config import NETWORK_SPLITS, TRANSFORMER_SPLIT, CollectConfig
from tuner.engine.networks import load_network
from tuner.engine.tasks import Lowering, extract_tasks


@dataclass
class Entry:
    """A workload to measure.

    Attributes:
        name: Stable name (``conv2d_c64_h56_o64_k3_s1``, ``resnet-18/fused_conv2d1_add1_relu1``).
        split: one of :data:`tuner.app.collect_config.SPLITS`.
        kind: Workload kind (``conv2d``, ..., ``dense``; held-out: ``network-conv``).
        mod: The ``IRModule`` MetaSchedule tunes.
        samples: Measurements wanted.
        info: Extra description for ``meta.json`` (parameters, FLOPs, networks).
    """

    name: str
    split: str
    kind: str
    mod: Any
    samples: int
    info: dict


def split_layout(split: str) -> str:
    """The data layout of a split's workloads: ``NHWC`` for ``*-nhwc``, else ``NCHW``."""
    return "NHWC" if split.endswith("-nhwc") else "NCHW"


def train_entries(per_kind: int, other_per_kind: int, seed: int, samples: int,
                  target, layout: str = "NCHW") -> list[Entry]:
    """The generated training workloads as entries, each the fused function the tuner's own
    pipeline makes of it (epilogue fused, weights layout-free), as a network's tasks are.
    In ``NHWC``, the workloads of the 2-D kinds only (:func:`metatune.workloads.nhwc_workloads`)."""
    split = "train" if layout == "NCHW" else "train-nhwc"
    workloads = (training_workloads if layout == "NCHW" else nhwc_workloads)(
        per_kind, seed, other_per_kind)
    return generated_entries(workloads, split, samples, target)


def generated_entries(workloads: list, split: str, samples: int, target) -> list[Entry]:
    """Generated workloads (each with ``name``, ``kind``, ``to_dict()`` and
    ``relax_module()``) as entries, each the one task the tuner's pipeline makes of it.

    Raises:
        RuntimeError: Fusion gave a workload more or fewer than one task.
    """
    out = []
    for wl in workloads:
        tasks = extract_tasks(wl.relax_module(), target)
        if len(tasks) != 1:
            raise RuntimeError(f"{wl.name}: fusion gave {len(tasks)} tasks "
                               f"({', '.join(t.name for t in tasks)}), expected one")
        out.append(Entry(wl.name, split, wl.kind, tasks[0].extracted.dispatched[0], samples,
                         {**wl.to_dict(), "flops": tasks[0].flops}))
    return out


def _network(name: str):
    """A built-in network by name, or any ``module:callable`` returning an ``nn.Module``."""
    return load_network(model_spec=name) if ":" in name else load_network(name)


#: The conv tasks already extracted in this process, per (network, target, layout): a
#: collection plans several splits from the same networks (each network split leaves out
#: the held-out and earlier networks' tasks), and extraction takes seconds per network.
_CONV_TASKS: dict[tuple[str, str, str], list[tuple[str, Any, float, int]]] = {}


def conv_tasks(net: str, target, layout: str) -> list[tuple[str, Any, float, int]]:
    """A network's convolution tasks as ``tune.py`` extracts them in ``layout``: per task
    its name, module, FLOPs and structural hash (extracted once per process)."""
    from tvm_ffi import structural_hash

    key = (net, str(target), layout)
    if key not in _CONV_TASKS:
        tasks = extract_tasks(_network(net).relax_mod, target, Lowering(layout=layout))
        _CONV_TASKS[key] = [(t.name, t.extracted.dispatched[0], t.flops,
                             structural_hash(t.extracted.dispatched[0]))
                            for t in tasks if t.is_conv]
    return _CONV_TASKS[key]


def network_entries(networks: tuple[str, ...], target, samples: int, split: str,
                    exclude: Collection[int] = ()) -> list[Entry]:
    """Every distinct convolution task of the networks, as entries: as ``tune.py``
    extracts them in the split's layout (:func:`conv_tasks`).

    Args:
        networks: Built-in network names or ``module:callable`` specs
            (``torchvision.models:googlenet``); a spec's workloads are named by its callable
            (``googlenet/fused_conv2d...``).
        target: The ``tvm.target.Target`` tasks are extracted for.
        samples: Measurements wanted per workload.
        split: ``heldout`` / ``train-networks`` or their ``-nhwc`` twins.
        exclude: Structural hashes of tasks to leave out (a training split leaves out every
            held-out task: :func:`network_hashes`).
    """
    seen: dict[int, Entry] = {}
    for net in networks:
        short = net.rsplit(":", 1)[-1]
        for name, mod, flops, key in conv_tasks(net, target, split_layout(split)):
            if key in exclude:
                continue
            if key in seen:
                seen[key].info["networks"].append(short)
                continue
            seen[key] = Entry(f"{short}/{name}", split, "network-conv", mod, samples,
                              {"flops": flops, "networks": [short]})
    return list(seen.values())


def heldout_entries(networks: tuple[str, ...], target, samples: int,
                    layout: str = "NCHW") -> list[Entry]:
    """Every distinct convolution task of the held-out networks (:func:`network_entries`)."""
    split = "heldout" if layout == "NCHW" else "heldout-nhwc"
    return network_entries(networks, target, samples, split)


def network_hashes(networks: tuple[str, ...], target, layout: str) -> set[int]:
    """The structural hashes of every convolution task of the networks in ``layout``: of
    the held-out networks, what every network training split leaves out, so the held-out
    set stays unseen; of a network split's networks (a superset of what the split holds),
    what the network splits after it leave out."""
    return {key for net in networks for *_, key in conv_tasks(net, target, layout)}


def network_split(split: str) -> str | None:
    """The network training split a split is, or its NHWC twin is (a key of
    :data:`tuner.app.collect_config.NETWORK_SPLITS`), else ``None``."""
    base = split.removesuffix("-nhwc")
    return base if base in NETWORK_SPLITS else None


def networks_setting(split: str) -> str | None:
    """The setting naming the networks whose conv tasks a split holds (``networks`` for the
    held-out splits, ``train_networks``, ... for the network training splits), else ``None``
    (generated workloads)."""
    if base := network_split(split):
        return NETWORK_SPLITS[base]
    return "networks" if split.startswith("heldout") else None


def plan_split(cfg: CollectConfig, split: str, target) -> list[Entry]:
    """The workloads a split holds, each with the samples wanted.

    A network training split holds the conv tasks of its networks (``train_networks``,
    ``more_networks``, ...: :data:`tuner.app.collect_config.NETWORK_SPLITS`) that no
    held-out network and no network of an earlier network split has.

    Args:
        cfg: The collect configuration.
        split: One of :data:`tuner.app.collect_config.SPLITS`.
        target: The ``tvm.target.Target`` tasks are extracted for.
    """
    layout = split_layout(split)
    if base := network_split(split):
        known = network_hashes(tuple(cfg.networks), target, layout)
        for earlier, key in NETWORK_SPLITS.items():
            if earlier == base:
                break
            known |= network_hashes(tuple(getattr(cfg, key)), target, layout)
        return network_entries(tuple(getattr(cfg, networks_setting(split))), target,
                               cfg.train_networks_samples, split, exclude=known)
    if split == TRANSFORMER_SPLIT:
        return generated_entries(transformer_workloads(cfg.transformer_per_kind, cfg.seed),
                                 split, cfg.train_samples, target)
    if split.startswith("train"):
        return train_entries(cfg.per_kind, cfg.other_per_kind, cfg.seed, cfg.train_samples,
                             target, layout)
    return heldout_entries(tuple(cfg.networks), target, cfg.heldout_samples, layout)
