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
    "seed": "seed", "preset": "preset", "cost_model": "cost_model", "search": "search",
    "work_dir": "work_dir",
    "checkpoint": "metatune.checkpoint", "graph": "metatune.graph", "config": None,
}


def parse_args(argv: list[str]) -> tuple[str, list[str]]:
    """Parse flags and dotlist overrides into (yaml path, dotlist)."""
    from tuner.app.config import DEFAULT_TUNE_YAML

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--network", help="alexnet | resnet-18 | vgg-16 | squeezenet | mobilenet-v2")
    p.add_argument("--onnx", help="path of an ONNX model to tune instead")
    p.add_argument("--model", help="module:callable returning a torch.nn.Module")
    p.add_argument("--input-shape", help="input shape without batch, e.g. 3,224,224")
    p.add_argument("--batch", type=int)
    p.add_argument("--target", help='llvm (host CPU), cuda, rocm, or a JSON target dict')
    p.add_argument("--num-cores", type=int,
                   help="CPU cores (= TVM and PyTorch threads) to tune and run with; "
                   "default: all this process may use")
    p.add_argument("--trials", type=int, help="measured trials in total (database counts)")
    p.add_argument("--trials-per-task", type=int)
    p.add_argument("--trials-per-round", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--preset", help="the paper's frameworks: xgb | xgb-Xfer | meta-BO | meta-BO-T")
    p.add_argument("--cost-model", help="metatune | xgb | xgb-xfer | mlp | random")
    p.add_argument("--search", help="bo | evolutionary | replay")
    p.add_argument("--checkpoint", help="MetaTune cost-model checkpoint (python train.py)")
    p.add_argument("--graph", help="super | plain: graph mode of the MetaTune checkpoint")
    p.add_argument("--work-dir", help="database, logs, TensorBoard and report go here")
    p.add_argument("--repair-db", action="store_true",
                   help="move unreadable database lines aside instead of stopping")
    p.add_argument("--config", default=DEFAULT_TUNE_YAML, help="YAML defaults")
    p.add_argument("overrides", nargs="*", help="dotlist overrides, e.g. runner.number=5")
    args = p.parse_args(argv)
    dotlist = []
    for flag, key in FLAGS.items():
        value = getattr(args, flag)
        if key is None or value is None:
            continue
        if flag == "input_shape":
            value = "[" + value.replace("x", ",") + "]"
        elif isinstance(value, str) and value.startswith("{"):
            value = "'" + value.replace("'", "\\'") + "'"  # JSON target: keep it a string
        dotlist.append(f"{key}={value}")
    if args.repair_db:
        dotlist.append("repair_db=true")
    if args.onnx or args.model:
        dotlist.append("network=null")
    return args.config, dotlist + list(args.overrides)


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the process exit code."""
    from metatune.errors import MetaTuneError

    yaml_path, dotlist = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        from tuner.app.run import run_tune
        from tuner.app.config import load_tune_config

        run_tune(load_tune_config(yaml_path, dotlist))
    except MetaTuneError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: every measurement made so far is in the work dir's database; "
              "run the same command again to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
