# Last ran on commit accee62
"""How long loading the cost model's checkpoint takes in a fresh process, two ways.

``tune.py`` loads the checkpoint once per run. Until 2026-12-04 it went through Lightning
(``MetaModule.load_from_checkpoint``, which imports ``pytorch_lightning``); now it reads
the weights with ``torch.load`` (:mod:`metatune.checkpoint`). Each repeat starts one
fresh Python process per way, alternating, and times the load step itself (imports it
needs included; ``torch`` and this repository's modules imported before the clock starts,
as the tuner has them by then).

Usage:
    python -m experiments.checkpoint_load --repeats 5 --out docs/lab/compile/checkpoint-load
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from bench.common import REPO, provenance, write_results

#: Code per way: prints the seconds the load step took.
WAYS = {
    "Lightning (`MetaModule.load_from_checkpoint`, before)": (
        "import time, torch, tuner.models.cost_model\n"
        "t = time.perf_counter()\n"
        "from lightning_modules.meta import MetaModule\n"
        "m = MetaModule.load_from_checkpoint({ckpt!r}, map_location='cpu')\n"
        "print(time.perf_counter() - t)\n"),
    "plain torch (`metatune.checkpoint`, now)": (
        "import time, torch, tuner.models.cost_model\n"
        "t = time.perf_counter()\n"
        "from tuner.models.trained import load_model\n"
        "m = load_model({ckpt!r}, graph=None)\n"
        "print(time.perf_counter() - t)\n"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default="checkpoints/llvm-znver4-super.ckpt")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="docs/lab/compile/checkpoint-load")
    args = p.parse_args()
    prov = provenance("experiments.checkpoint_load")
    seconds: dict[str, list[float]] = {w: [] for w in WAYS}
    for _ in range(args.repeats):
        for way, code in WAYS.items():
            out = subprocess.run([sys.executable, "-c", code.format(ckpt=args.checkpoint)],
                                 cwd=REPO, check=True, capture_output=True, text=True).stdout
            seconds[way].append(float(out.strip().splitlines()[-1]))
    med = {w: statistics.median(s) for w, s in seconds.items()}
    doc = {**prov, "checkpoint": args.checkpoint, "repeats": args.repeats,
           "seconds": seconds, "median_seconds": med}
    lines = ["# Loading the cost model's checkpoint: with Lightning and without", "",
             f"- command: `{prov['command']}`", f"- date: {prov['date']}",
             f"- machine: {prov['machine']}",
             f"- checkpoint: `{args.checkpoint}`; {args.repeats} fresh processes per way, "
             "alternating; the load step timed with the imports it needs (torch and the "
             "tuner's modules already imported, as in `tune.py`)", "",
             "| way | median s | each repeat (s) |", "|---|---|---|"]
    lines += [f"| {w} | {med[w]:.2f} | {', '.join(f'{x:.2f}' for x in seconds[w])} |"
              for w in WAYS]
    write_results(f"{args.out}.json", f"{args.out}.md", doc, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
