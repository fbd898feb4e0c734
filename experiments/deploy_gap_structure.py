"""Issue 62, structure: do the tuned build (``bench.runtimes``/``export.py``) and the
``torch.compile(backend="metatune")`` graph compile the same fused functions, and does each
find the same schedules in the work dir's database?

Prints, per path, the count of fused PrimFuncs, how many the database schedules, and the
difference of the two sets of structural hashes. No timing.

    nice -n 19 .venv/bin/python -m experiments.deploy_gap_structure \
        --work-dir work/runtimes/mobilenet-v2-128
"""

from __future__ import annotations

import argparse
import json
import os


def fused_functions(relax_mod, target, database, lowering):
    """The fused module ``build_network`` compiles, and the structural hash -> name of its
    PrimFuncs.

    Returns:
        ``({hash: name}, fused IRModule)``.
    """
    import tvm
    from tvm_ffi import structural_hash

    from tuner.engine.evaluate import build_network

    fused: list = []
    build_network(relax_mod, target, database, lowering, on_fused=fused.append)
    normalize = tvm.get_global_func("tvm.s_tir.meta_schedule.normalize_mod")
    return {int(structural_hash(normalize(f))): gv.name_hint
            for gv, f in fused[0].functions.items() if isinstance(f, tvm.tirx.PrimFunc)}, fused[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--work-dir", required=True)
    args = p.parse_args()

    import torch

    from tuner.app.dynamo import BackendOptions, count_scheduled, open_tuned
    from tuner.app.export import build_target, read_work_dir
    from tuner.engine.database import open_database
    from tuner.engine.fx_graph import import_graph
    from tuner.engine.networks import load_network
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering
    from tuner.search.zero_shot import with_predictions

    with open(os.path.join(args.work_dir, "report.json"), encoding="utf-8") as f:
        config = json.load(f)["config"]
    _, settings, _ = read_work_dir(args.work_dir)
    target, _ = build_target(config, args.work_dir)
    net = load_network(config.get("network"), batch=int(config.get("batch") or 1),
                       fold_bn=bool(config.get("fold_bn", True)))
    lowering = Lowering(pack_weights=bool(config.get("pack_weights", True)),
                        layout=str(config.get("layout") or settings.get("layout") or "NCHW"))
    database = with_predictions(open_database(args.work_dir), args.work_dir)
    tuned, tuned_mod = fused_functions(net.relax_mod, target, database, lowering)
    print("tuned build: target", target, "lowering", lowering)
    print("  scheduled", count_scheduled(tuned_mod, database, target))

    captured = []

    def capture(gm, example_inputs):
        captured.append(import_graph(gm, example_inputs))
        return gm.forward

    torch.compile(net.torch_module, backend=capture)(torch.from_numpy(net.example_input()))
    opts = BackendOptions.parse({"work_dir": args.work_dir})
    info = resolve_target(opts.target)
    bdb, blow, source = open_tuned(opts, info)
    backend, backend_mod = fused_functions(captured[0].relax_mod, info.target, bdb, blow)
    print("backend: target", info.target, "lowering", blow, "source", source,
          "graphs", len(captured))
    print("  scheduled", count_scheduled(backend_mod, bdb, info.target))
    print("fused functions: tuned", len(tuned), "backend", len(backend))
    print("only in tuned:", sorted(tuned[h] for h in set(tuned) - set(backend)))
    print("only in backend:", sorted(backend[h] for h in set(backend) - set(tuned)))


if __name__ == "__main__":
    main()
