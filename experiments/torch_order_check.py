# Last ran on commit b43634b
"""Is PyTorch timed fairly in the process that just ran TVM?

``tune.py`` times PyTorch in its own process, right after the tuned TVM build. TVM's
thread pool could, in principle, still hold the cores or have pinned threads there. This
check times PyTorch eager (same module, batch-norm folded, same threads) in a fresh process
that never loaded TVM, and again right after a tuned TVM build in another process, twice
each, alternating, and appends the numbers to ``docs/bench/torch_order_check.json``.

    python -m experiments.torch_order_check resnet-18 work/parity/resnet-18-s0
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.common import REPO, provenance

FRESH = r'''
import sys
import numpy as np
from tuner.engine.networks import builtin_module, fold_batch_norm
from tuner.engine.evaluate import time_torch
m, _ = fold_batch_norm(builtin_module(sys.argv[1]))
x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
print(time_torch(m, x, 20, int(sys.argv[2])).median_ms)
'''
AFTER = r'''
import sys
from tuner.engine.database import open_database
from tuner.engine.evaluate import compile_network, time_torch
from tuner.engine.networks import load_network
from tuner.engine.targets import resolve_target
from tuner.search.zero_shot import with_predictions
info = resolve_target("llvm")
net, work = load_network(sys.argv[1]), sys.argv[2]
tuned = compile_network(net.relax_mod, info.target, with_predictions(open_database(work), work),
                        "cpu")
x = net.example_input()
print(tuned.time(x, 10, 200).median_ms, time_torch(net.torch_module, x, 20,
                                                   info.num_cores).median_ms)
'''


def main() -> int:
    from tuner.engine.targets import host_num_cores

    network, work = sys.argv[1], os.path.abspath(sys.argv[2])
    cores = str(host_num_cores())
    env = {**os.environ, "PYTHONPATH": REPO}
    rows = []
    for _ in range(2):
        fresh = subprocess.run([sys.executable, "-c", FRESH, network, cores], env=env,
                               capture_output=True, text=True, check=True).stdout.split()
        after = subprocess.run([sys.executable, "-c", AFTER, network, work], env=env,
                               capture_output=True, text=True, check=True).stdout.split()
        rows.append({"network": network, "torch_fresh_process_ms": float(fresh[-1]),
                     "tvm_tuned_ms": float(after[-2]), "torch_after_tvm_ms": float(after[-1])})
        print(json.dumps(rows[-1]), flush=True)
    path = os.path.join(REPO, "docs", "bench", "torch_order_check.json")
    doc = {"runs": []}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    doc["runs"].append({**provenance("experiments.torch_order_check"), "rows": rows})
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
