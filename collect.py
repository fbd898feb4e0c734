"""Collect the measured schedule dataset, or summarize it.

Examples:
    python collect.py run                      # resumable; Ctrl-C any time, rerun to go on
    python collect.py run train_samples=16 limit=2 out=/tmp/ds work_dir=/tmp/ds-work
    python collect.py run 'target={"kind": "llvm", "mcpu": "haswell"}'  # another platform
    python collect.py summary --json           # every dataset under data/ (or out=...)
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the exit code."""
    from metatune.errors import MetaTuneError

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="measure (resumable)")
    run.add_argument("overrides", nargs="*")
    summ = sub.add_parser("summary", help="workloads and valid samples per split and kind")
    summ.add_argument("--json", action="store_true")
    summ.add_argument("overrides", nargs="*")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        from tuner.app.collect_config import load_collect_config

        cfg = load_collect_config(args.overrides)
        if args.command == "run":
            import logging

            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
            from tuner.app.collect import run_collect

            summary = run_collect(cfg)
        else:
            from tuner.app.collect_summary import summarize, summarize_all

            summary = (summarize(cfg.out, cfg.work_dir) if cfg.out else
                       summarize_all(os.path.join(ROOT, "data")))
    except MetaTuneError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: measurements so far are kept; rerun to continue", file=sys.stderr)
        return 130
    if args.command == "summary" and not args.json:
        datasets = summary if not cfg.out else {"": summary}
        for name, splits in datasets.items():
            if name:
                print(f"{name}:")
            _print_summary(splits)
    else:
        print(json.dumps(summary, indent=2))
    return 0


def _print_summary(summary: dict) -> None:
    """Print one dataset's summary as text."""
    for split, s in summary.items():
        print(f"{split}: {s['workloads']} workloads, {s['valid_samples']} valid samples "
              f"({s['failed_samples']} failed), min {s['min_valid_per_workload']} per workload")
        for kind, k in sorted(s["per_kind"].items()):
            print(f"  {kind:<18} {k['workloads']:>3} workloads  {k['valid_samples']:>6} valid")


if __name__ == "__main__":
    sys.exit(main())
