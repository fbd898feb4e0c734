"""Tune a network with MetaSchedule, compile it, and report its latency.

Examples:
    python tune.py --network alexnet
    python tune.py --network resnet-18 --trials 200 --work-dir work/r18
    python tune.py --onnx model.onnx --input-shape 3,224,224 trials=32
    python tune.py --model torchvision.models:mobilenet_v2 runner.number=5
"""

from __future__ import annotations

import argparse
import sys

#: flag -> config key (every flag is also reachable as a dotlist override).
FLAGS = {
    "network": "network", "onnx": "onnx", "model": "model", "input_shape": "input_shape",
    "batch": "batch", "target": "target", "num_cores": "num_cores", "trials": "trials",
    "trials_per_task": "trials_per_task", "trials_per_round": "trials_per_round",
    "rounds_per_task": "rounds_per_task",
    "seed": "seed", "preset": "preset", "cost_model": "cost_model", "search": "search",
    "work_dir": "work_dir", "runner": "runner.kind", "export": "export",
    "checkpoint": "metatune.checkpoint", "graph": "metatune.graph", "config": None,
    "precision": "precision",
}


def parse_shape(text: str) -> list[int]:
    """``3,224,224``, ``3x224x224`` or ``[3, 224, 224]`` as a list of positive ints.

    Raises:
        ConfigError: Not a list of positive integers.
    """
    from metatune.errors import ConfigError

    parts = text.strip().strip("[]()").replace("x", ",").split(",")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        dims = []
    if not dims or any(d <= 0 for d in dims):
        raise ConfigError(f"--input-shape {text!r}: give positive dims without the batch, "
                          "e.g. 3,224,224")
    return dims


def parse_args(argv: list[str]) -> tuple[str, list[str]]:
    """Parse flags and dotlist overrides into (yaml path, dotlist).

    Raises:
        ConfigError: Conflicting flags or a malformed ``--input-shape``.
    """
    from metatune.errors import ConfigError
    from tuner.app.config import DEFAULT_TUNE_YAML

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--network", help="alexnet | resnet-18 | vgg-16 | squeezenet | mobilenet-v2 | "
                   "convnext-atto | bert-tiny | bert-mini (encoders that take float token "
                   "embeddings, sequence x 128 and sequence x 256)")
    p.add_argument("--onnx", help="path of an ONNX model to tune instead")
    p.add_argument("--model", help="module:callable returning a torch.nn.Module")
    p.add_argument("--input-shape", help="input shape without batch, e.g. 3,224,224 (default: "
                   "the network's own; bert-tiny: 128,128, bert-mini: 128,256, sequence x "
                   "hidden)")
    p.add_argument("--batch", type=int)
    p.add_argument("--target", help='llvm (host CPU), cuda, rocm, or a JSON target dict')
    p.add_argument("--precision", help="fp32 | bf16: convolutions and dense layers on bf16 "
                   "inputs (a CPU with avx512_bf16; docs/precision.md)")
    p.add_argument("--num-cores", type=int,
                   help="CPU cores (= TVM and PyTorch threads) to tune and run with; "
                   "default: all this process may use")
    p.add_argument("--trials", type=int, help="measured trials in total (database counts)")
    p.add_argument("--trials-per-task", type=int)
    p.add_argument("--trials-per-round", type=int)
    p.add_argument("--rounds-per-task", type=int,
                   help="the budget as rounds of every task (instead of --trials): "
                        "rounds x trials-per-round x the network's tasks")
    p.add_argument("--seed", type=int)
    p.add_argument("--preset", help="the paper's frameworks: xgb | xgb-Xfer | RL | meta-BO | "
                   "meta-BO-T | meta-RL | meta-RL-T (any case)")
    p.add_argument("--cost-model", help="metatune | xgb | xgb-xfer | mlp | random")
    p.add_argument("--search", help="bo | rl | evolutionary | replay")
    p.add_argument("--checkpoint", help="MetaTune cost-model checkpoint (python train.py)")
    p.add_argument("--graph", help="super | plain: graph mode of the MetaTune checkpoint")
    p.add_argument("--work-dir", help="database, logs, TensorBoard and report go here")
    p.add_argument("--export", help="after tuning, write the compiled network to this "
                   "directory (model.so + manifest.json; runs with tvm.runtime alone); "
                   "export_overwrite=true replaces an artifact there")
    p.add_argument("--runner", help="local | rpc: measure here or on the servers behind a TVM "
                   "RPC tracker (runner.rpc.tracker_host=..., runner.rpc.key=...)")
    p.add_argument("--repair-db", action="store_true",
                   help="move unreadable database lines aside instead of stopping")
    p.add_argument("--no-memory", action="store_true",
                   help="neither read nor add to this machine's tuning memory (memory.enabled="
                   "false; docs/memory.md)")
    p.add_argument("--config", default=DEFAULT_TUNE_YAML, help="YAML defaults")
    p.add_argument("overrides", nargs="*", help="dotlist overrides, e.g. runner.number=5")
    args = p.parse_args(argv)
    if args.network and (args.onnx or args.model):
        raise ConfigError(f"--network {args.network} with --{'onnx' if args.onnx else 'model'}: "
                          "give one network: --network, --onnx or --model")
    if args.onnx and args.model:
        raise ConfigError("--onnx with --model: give one network: --network, --onnx or --model")
    if args.rounds_per_task is not None and (args.trials or args.trials_per_task):
        raise ConfigError(f"--rounds-per-task {args.rounds_per_task} with --trials"
                          f"{'-per-task' if args.trials_per_task else ''}: give one budget "
                          "(--rounds-per-task sets both from the network's tasks)")
    dotlist = []
    for flag, key in FLAGS.items():
        value = getattr(args, flag)
        if key is None or value is None:
            continue
        if flag == "input_shape":
            value = "[" + ",".join(map(str, parse_shape(value))) + "]"
        elif isinstance(value, str) and value.startswith("{"):
            value = "'" + value.replace("'", "\\'") + "'"  # JSON target: keep it a string
        dotlist.append(f"{key}={value}")
    if args.repair_db:
        dotlist.append("repair_db=true")
    if args.no_memory:
        dotlist.append("memory.enabled=false")
    if args.onnx or args.model:
        dotlist.append("network=null")
    return args.config, dotlist + list(args.overrides)


def kill_children() -> None:
    """Kill this process's remaining children (builder or runner workers still starting)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - TVM depends on it
        return
    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.Error:
            pass


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the process exit code."""
    import logging

    from metatune.errors import MetaTuneError
    from tuner.engine.durability import WRITE_ERRNOS

    logging.raiseExceptions = False  # a log line that cannot be written prints no traceback
    try:
        yaml_path, dotlist = parse_args(sys.argv[1:] if argv is None else argv)
        from tuner.app.config import load_tune_config
        from tuner.app.run import run_tune

        run_tune(load_tune_config(yaml_path, dotlist))
    except MetaTuneError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; rerun to resume (every measurement made so far is in the work "
              "dir's database)", file=sys.stderr)
        kill_children()
        return 130
    except OSError as err:  # a write that failed outside the tuning loop (report, curves)
        if err.errno not in WRITE_ERRNOS:
            raise
        print(f"error: cannot write {err.filename or 'a file'} ({err.strerror}); free some "
              "space or make the work dir writable, then rerun the same command "
              "(the measurements are kept)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
