"""Compile a tuned work dir into a directory that runs with ``tvm.runtime`` alone.

The artifact holds ``model.so`` (the tuned network, weights inside) and ``manifest.json``
(target, inputs, outputs, provenance, and a snippet that loads and runs it). Nothing is
tuned again: the network is imported as ``tune.py`` imported it and compiled with the
work dir's schedules, measured first, then predicted.

Examples:
    python export.py --work-dir work/alexnet --out alexnet.metatune
    python export.py --work-dir work/r18 --out r18.metatune --overwrite
    python export.py --work-dir work/pi --cross-cc aarch64-linux-gnu-g++   # cross target
    python export.py --work-dir work/pi --time --runner rpc --key pi    # timed on the device
"""

from __future__ import annotations

import argparse
import sys


def parse_args(argv: list[str]):
    """The export configuration of the command line (:class:`tuner.app.export.ExportConfig`).

    Raises:
        ConfigError: A malformed ``--tracker``.
    """
    from metatune.errors import ConfigError
    from tuner.app.export import ExportConfig

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work-dir", required=True, help="the work dir of a finished tune.py run")
    p.add_argument("--out", help="the artifact directory (default: <network>.metatune here)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an artifact already at --out")
    p.add_argument("--no-check", action="store_true",
                   help="do not run the exported library against the reference")
    p.add_argument("--cross-cc", help="cross compiler linking model.so for a target of "
                   "another triple (default: model.tar, linked on the device)")
    p.add_argument("--time", action="store_true",
                   help="time the artifact (the work dir's evaluate.repeat windows of "
                   "evaluate.min_repeat_ms) and record it in the manifest")
    p.add_argument("--runner", choices=("local", "rpc"),
                   help="where --time runs it (default: where tune.py timed the work dir)")
    p.add_argument("--tracker", help="HOST:PORT of the RPC tracker (default: the work dir's)")
    p.add_argument("--key", help="RPC device key (default: the work dir's)")
    args = p.parse_args(argv)
    rpc = {}
    if args.tracker:
        host, _, port = args.tracker.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"--tracker {args.tracker!r}: give HOST:PORT, e.g. 127.0.0.1:9190")
        rpc.update(tracker_host=host, tracker_port=int(port))
    if args.key:
        rpc["key"] = args.key
    return ExportConfig(work_dir=args.work_dir, out=args.out, overwrite=args.overwrite,
                        check=not args.no_check, cross_cc=args.cross_cc, time=args.time,
                        runner=args.runner, rpc=rpc or None)


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the process exit code."""
    import logging

    from metatune.errors import MetaTuneError

    logging.basicConfig(level=logging.INFO, datefmt="%H:%M:%S",
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = parse_args(sys.argv[1:] if argv is None else argv)
        from tuner.app.export import run_export

        out, manifest = run_export(cfg)
    except MetaTuneError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; nothing was written", file=sys.stderr)
        return 130
    except OSError as err:
        print(f"error: cannot write {err.filename or 'the artifact'} ({err.strerror})",
              file=sys.stderr)
        return 2
    check = manifest.get("check_error")
    print(f"exported {manifest['network']} for {manifest['target']} to {out}: "
          f"{manifest['provenance']['records']} records"
          + (f", output checked (rel. max error {check:.1e})" if check is not None else ""))
    if timing := manifest.get("timing"):
        print(f"latency {timing['median_ms']:.3f} ms (median of {len(timing['runs_ms'])} "
              f"windows, {timing['where']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
