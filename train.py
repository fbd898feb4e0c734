"""Pre-train and meta-train the MetaTune cost model on the collected dataset.

The checkpoint goes to runs/train/<dataset>-<graph>.ckpt (out=PATH to choose; a file that
exists is replaced only with overwrite=true); tune with it: tune.py --checkpoint PATH.

Examples:
    python train.py                        # configs/train.yaml defaults
    python train.py graph=plain meta.steps=500
    python train.py out=checkpoints/mine.ckpt overwrite=true
"""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the exit code."""
    from metatune.errors import MetaTuneError

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None, help="YAML defaults (configs/train.yaml)")
    p.add_argument("overrides", nargs="*", help="dotlist overrides, e.g. graph=plain")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("metatune.train").info("train.py: reading the configuration (torch and "
                                             "TVM take a few seconds to start)")
    try:
        from lightning_modules.app import run_train
        from lightning_modules.config import DEFAULT_TRAIN_YAML, load_train_config

        result = run_train(load_train_config(args.config or DEFAULT_TRAIN_YAML, args.overrides))
    except (MetaTuneError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"checkpoint: {result['checkpoint']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
