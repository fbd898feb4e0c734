"""Tune resnet-18 for a few rounds twice, the cost model and BO's GP on the GPU, then on the
CPU, and print the search and model-update seconds per round of each (issue 15).

Prepared to run on a machine with a CUDA or ROCm GPU that torch sees (the TVM target stays
llvm: measurements run on the CPU either way). Without a GPU it says so and exits 2.

    python scripts/gpu_check.py                 # 64 trials in rounds of 16
    python scripts/gpu_check.py --trials 32
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(device: str, trials: int, work: str) -> list[dict]:
    """Tune with the model and GP on ``device``; the ``rounds.jsonl`` rows."""
    from tuner.app.config import load_tune_config
    from tuner.app.run import run_tune

    run_tune(load_tune_config(overrides=[
        "network=resnet-18", "predict_unmeasured.enabled=false", f"work_dir={work}",
        f"trials={trials}", "trials_per_round=16", f"device={device}",
        "evaluate.enabled=false", "progress=false", "tensorboard=false",
        "log_level=WARNING"]))
    with open(os.path.join(work, "rounds.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=64)
    args = p.parse_args()
    import torch

    from metatune.device import describe, resolve_device

    if not torch.cuda.is_available():
        print("no GPU visible to torch here: run this on a CUDA or ROCm machine",
              file=sys.stderr)
        return 2
    print(f"GPU: {describe(resolve_device('cuda'))}; torch {torch.__version__}")
    for device in ("cuda", "cpu"):
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{device}-") as work:
            rows = run(device, args.trials, work)
        search = [r["search_s"] for r in rows]
        update = [r["update_s"] for r in rows]
        print(f"{device:>4}: {len(rows)} rounds; search s/round median "
              f"{statistics.median(search):.3f} (first {search[0]:.3f}); update s/round "
              f"median {statistics.median(update):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
