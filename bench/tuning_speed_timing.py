"""The tuning-speed benchmark's latencies: every rung build of a network, all presets and
seeds, timed side by side with PyTorch eager in one process.

Latencies taken minutes apart on a shared machine disagree by more than the differences
this benchmark looks for, so no rung is timed when it is tuned: each network's exported
builds (``<work dir>/stage-<budget>``, loaded with ``tvm.runtime`` as
:func:`metatune.load` loads them) and PyTorch eager of the same network (as ``tune.py``
imports it: weights seeded, batch norm folded) are timed in alternating rounds
(:func:`tuner.engine.timing.interleaved`), each build with the VM's time evaluator as
``tune.py`` times its tuned build. A network is timed again whenever its set of artifacts
changed (a new rung, or one exported again).
"""

from __future__ import annotations

import os

from bench.common import in_repo, write_json_atomic
from bench.machine_load import quiet_timing
from bench.tuning_speed_records import artifact_key, read_json, rung_records, timing_path


def artifacts(runs: str, platform: str, network: str) -> dict[str, dict]:
    """The exported rung builds of ``network`` that exist: key -> ``preset``, ``seed``,
    ``budget``, ``artifact`` (repository-relative) and ``exported`` (its manifest's date,
    so that a build exported again counts as another)."""
    out = {}
    for record in rung_records(runs, platform, network):
        for rung in record["rungs"]:
            manifest = read_json(os.path.join(in_repo(rung["artifact"]), "manifest.json"))
            if manifest is not None:
                out[artifact_key(record["preset"], record["seed"], rung["budget"])] = {
                    "preset": record["preset"], "seed": record["seed"],
                    "budget": rung["budget"], "artifact": rung["artifact"],
                    "exported": manifest.get("provenance", {}).get("date")}
    return dict(sorted(out.items(), key=lambda kv: (kv[1]["budget"], kv[1]["seed"],
                                                    kv[1]["preset"])))


def _size_mb(paths: list[str]) -> float:
    return sum(os.path.getsize(os.path.join(root, f)) for p in paths
               for root, _, files in os.walk(p) for f in files) / 2**20


def time_network(network: str, arts: dict[str, dict], timing: dict, command: str) -> dict:
    """Time every artifact of ``arts`` and PyTorch eager side by side.

    Args:
        network: The network (as the rung records name it).
        arts: :func:`artifacts`' result (not empty).
        timing: ``windows``, ``min_window_ms`` and ``rounds`` of
            :func:`tuner.engine.timing.interleaved`.
        command: The command timing it (recorded).

    Returns:
        The timing record: ``latency_ms`` and ``latency_windows_ms`` per artifact key and
        ``torch``, ``rel_error`` of each build's output against PyTorch's, the
        ``artifacts`` timed, ``runtime`` (TVM and PyTorch threads, read back), ``machine``
        (CPU model and flags), ``target``, ``timing``, ``code``, ``date``.
    """
    import tvm

    from bench.runtime_timers import relative_error
    from metatune.deploy import read_manifest
    from metatune.provenance import code_version, machine_info
    from tuner.engine.evaluate import CompiledNetwork
    from tuner.engine.networks import load_network
    from tuner.engine.runtime import configure_tvm_threads, runtime_info
    from tuner.engine.targets import resolve_target
    from tuner.engine.timing import interleaved, torch_timer

    paths = {k: in_repo(a["artifact"]) for k, a in arts.items()}
    first = read_manifest(next(iter(paths.values())))["provenance"]
    source = first["source"]
    info = resolve_target("llvm")
    configure_tvm_threads(info.num_cores)
    net = load_network(source.get("network"), model_spec=source.get("model"),
                       input_shape=tuple(source["input_shape"]) if source.get("input_shape")
                       else None, batch=int(source.get("batch") or 1),
                       fold_bn=bool(first.get("fold_bn", True)))
    x = net.example_input()
    reference = net.reference(x)
    print(f"{network}: loading {len(paths)} builds ({_size_mb(list(paths.values())):.0f} MiB) "
          "and PyTorch eager into one process", flush=True)
    timers, errors = {}, {}
    for key, path in paths.items():
        manifest = read_manifest(path)
        built = CompiledNetwork(tvm.runtime.load_module(os.path.join(path, manifest["library"])),
                                manifest["device"])
        errors[key] = relative_error(built.run(x), reference)
        timers[key] = built.timer(x)
    timers["torch"] = torch_timer(net.torch_module, x, info.num_cores)
    with quiet_timing(60 * timing.get("quiet_wait_minutes", 10)) as loads:
        print(f"{network}: timing {len(timers)} runtimes side by side, {timing['rounds']} "
              f"alternating rounds", flush=True)
        latency = interleaved(timers, timing["windows"], timing["min_window_ms"],
                              timing["rounds"])
    machine = machine_info()
    return {
        "network": network, "artifacts": arts,
        "latency_ms": {k: lat.median_ms for k, lat in latency.items()},
        "latency_windows_ms": {k: lat.runs_ms for k, lat in latency.items()},
        "rel_error": errors, "runtime": runtime_info(info.num_cores), "machine": machine,
        "target": info.description,
        "timing": {**timing, "order": "alternating", "warm_call": True,
                   "windows_per_runtime": len(next(iter(latency.values())).runs_ms)},
        "code": code_version(), "date": machine["date"], "command": command,
        **loads,
    }


def time_networks(networks: list[str], runs: str, platform: str, timing: dict, command: str,
                  force: bool = False) -> list[str]:
    """Time each network whose set of artifacts differs from its timing record's (every
    network with artifacts when ``force``), and write its record.

    Returns:
        The networks timed.
    """
    timed = []
    for network in networks:
        arts = artifacts(runs, platform, network)
        if not arts:
            continue
        path = timing_path(runs, platform, network)
        old = read_json(path)
        if not force and old is not None and old.get("artifacts") == arts:
            print(f"{network}: its {len(arts)} builds were timed already (unchanged)",
                  flush=True)
            continue
        write_json_atomic(path, time_network(network, arts, timing, command))
        timed.append(network)
    return timed
