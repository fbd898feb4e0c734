"""TVM's pooling names a custom schedule rule TVM never registers: registered as what TVM
does without it (the annotation removed, the default rules go on), so the design spaces are
the same and no ``Unknown schedule rule`` line is printed."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The design spaces of tiny_classifier's tasks (a max-pool among them), seeded; with
#: ``off``, without tuner.engine.custom_rules' registration (TVM's own path).
SPACES = r'''
import sys
import tuner.engine.tasks as tasks
if sys.argv[1] == "off":
    tasks.register_pool_rules = lambda: None
from tvm.s_tir import meta_schedule as ms
from tuner.engine.networks import load_network
from tuner.engine.targets import resolve_target
network = load_network(None, model_spec="tests.models:tiny_classifier", input_shape=(4, 8, 8))
target = resolve_target("llvm", 1).target
for task in tasks.extract_tasks(network.relax_mod, target, tasks.Lowering()):
    ctx = ms.TuneContext(mod=task.extracted.dispatched[0], target=target, rand_state=7,
                         space_generator="post-order-apply", search_strategy="evolutionary",
                         task_name=task.name)
    for space in ctx.generate_design_space():
        print(task.name, space.trace, flush=True)
'''


def _spaces(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SPACES, mode], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_a_pooling_task_has_tvms_design_spaces_without_the_warning():
    on, off = _spaces("on"), _spaces("off")
    assert on.returncode == 0 and off.returncode == 0, (on.stderr[-2000:], off.stderr[-2000:])
    assert "max_pool2d" in on.stdout and "unannotate" in on.stdout
    assert on.stdout == off.stdout  # the same design spaces, seeded alike
    assert "Unknown schedule rule" not in on.stderr
