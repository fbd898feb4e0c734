"""What LLVM made of a schedule: counts read from its assembly, cached per schedule.

The cost models see a schedule before code generation (the loop-nest graph, MetaSchedule's
per-store features); whether LLVM then vectorized the inner loop, how wide, with gathers
or spills, they can only infer. These features read it off the compiled code, so a
benchmark can ask how much of a model's miss is visible there. Building costs about
0.6 s a schedule on 2 cores, so the features are cached (``cache_dir``: ``residuals.py
--cache``), one JSON file per workload and target, keyed by the schedule's trace; a new
cache folder starts from the features shipped for its target in ``data/compiled/``.

Per schedule, three groups of the same 14 counts (instructions; FMAs on 512-, 256- and
128-bit registers and scalar ones; vector loads and stores; stack accesses; broadcasts;
gathers; scalar instructions; memory operands; shuffles; branches): the whole code but the
runtime's helpers (``all_``), the innermost loops summed (``inner_``), and the innermost
loop with the most FMAs (``hot_``, the likely micro-kernel); then the number of loops and
innermost loops, the deepest nesting, the hot loop's FMAs per vector memory access and its
share of stack accesses. Loops are found as backward jumps in the assembly; counts are
static (one per instruction in the code, not per execution).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re

import numpy as np

logger = logging.getLogger(__name__)

VERSION = 1  #: bump when a feature changes (invalidates the cache)
COUNTS = ("n", "fma_zmm", "fma_ymm", "fma_xmm", "fma_s", "vload", "vstore", "stack",
          "bcast", "gather", "scalar", "mem", "shuffle", "branch")
FEATURE_NAMES = ([f"all_{k}" for k in COUNTS] + [f"inner_{k}" for k in COUNTS]
                 + [f"hot_{k}" for k in COUNTS]
                 + ["loops", "inner_loops", "depth", "hot_fma_per_mem", "hot_stack_share"])
#: features built ahead and committed, one archive per cache folder (``data/compiled/README.md``)
SHIPPED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "data", "compiled")
_HELPERS = ("__TVMBackend", "__truncsfhf2", "__extendhfsf2", "__tvm_set_raised")
_LABEL = re.compile(r"^([.\w$]+):")
_JUMP = re.compile(r"^\s+j\w+\s+([.\w$]+)")
_SHUFFLES = ("shuf", "perm", "unpck", "insert", "extract", "blend")


def _classify(line: str) -> dict[str, int]:
    """The counts one AT&T-syntax instruction line adds."""
    ins = line.split()[0]
    ops = line.strip()[len(ins):]
    c = {"n": 1}
    if ins.startswith(("vfmadd", "vfnmadd")):
        if ins.endswith(("ss", "sd")):
            c["fma_s"] = 1
        else:
            c["fma_zmm" if "zmm" in ops else "fma_ymm" if "ymm" in ops else "fma_xmm"] = 1
    if "(" in ops:
        c["mem"] = 1
        if "%rsp" in ops or "%rbp" in ops:
            c["stack"] = 1
        if ins.startswith("v"):  # the destination is the last operand
            c["vstore" if "(" in ops.rsplit(",", 1)[-1] else "vload"] = 1
    if ins.startswith(("vbroadcast", "vpbroadcast")):
        c["bcast"] = 1
    if "gather" in ins:
        c["gather"] = 1
    if not ins.startswith(("v", "j")):
        c["scalar"] = 1
    if any(s in ins for s in _SHUFFLES):
        c["shuffle"] = 1
    if ins.startswith("j"):
        c["branch"] = 1
    return c


def asm_features(asm: str) -> np.ndarray:
    """The features (module docstring) of one module's assembly.

    Args:
        asm: LLVM's x86 assembly (AT&T syntax), as ``Module.inspect_source("asm")`` gives it.

    Returns:
        A ``len(FEATURE_NAMES)`` float array.
    """
    body, keep = [], True
    for line in asm.splitlines():  # the kernel's functions, not the runtime's helpers
        m = _LABEL.match(line)
        if m and not m.group(1).startswith(".L"):
            keep = not m.group(1).startswith(_HELPERS)
        if keep:
            body.append(line)
    labels = {m.group(1): i for i, m in ((i, _LABEL.match(x)) for i, x in enumerate(body)) if m}
    loops = [(labels[m.group(1)], i) for i, m in ((i, _JUMP.match(x)) for i, x in enumerate(body))
             if m and m.group(1) in labels and labels[m.group(1)] < i]
    inner = [a for a in loops if not any(b != a and a[0] <= b[0] and b[1] <= a[1] for b in loops)]
    depth = max((sum(1 for b in loops if b[0] <= a[0] and a[1] <= b[1]) for a in loops),
                default=0)

    def count(first: int, last: int) -> np.ndarray:
        total = dict.fromkeys(COUNTS, 0)
        for line in body[first:last + 1]:
            s = line.strip()
            if not s or s.startswith((".", "#")) or _LABEL.match(line):
                continue
            for k, v in _classify(line).items():
                total[k] += v
        return np.array([total[k] for k in COUNTS], float)

    whole = count(0, len(body) - 1)
    per = (np.stack([count(a, b) for a, b in inner]) if inner
           else np.zeros((1, len(COUNTS))))
    fmas = per[:, 1:5].sum(1)
    hot = per[np.lexsort((per[:, 0], fmas))[-1]]  # most FMAs, then the longest
    extra = np.array([len(loops), len(inner), depth, hot[1:5].sum() / max(hot[5] + hot[6], 1),
                      hot[7] / max(hot[0], 1)])
    return np.concatenate([whole, per.sum(0), hot, extra])


def log_counts(raw: np.ndarray) -> np.ndarray:
    """:func:`compiled_features`'s ``n x d`` array log-scaled (``log1p``), a schedule that
    did not build (``nan``) given each feature's median over the others."""
    x = np.where(np.isnan(raw), np.nan_to_num(np.nanmedian(raw, 0)), raw)
    return np.log1p(np.maximum(x, 0.0))


def _key(trace: str) -> str:
    return hashlib.sha1(trace.encode()).hexdigest()[:16]


def unpack_shipped(folder: str) -> bool:
    """Fill a new cache folder from the features shipped in :data:`SHIPPED`
    (``<folder name>.tar.gz``, a tar of that folder), when there are some for its target.

    Returns:
        Whether an archive was unpacked.
    """
    import tarfile

    archive = os.path.join(SHIPPED, os.path.basename(folder) + ".tar.gz")
    if not os.path.isfile(archive):
        return False
    with tarfile.open(archive) as tar:
        tar.extractall(os.path.dirname(folder), filter="data")
    logger.info("compiled features unpacked from %s into %s", archive, folder)
    return True


def cache_folder(cache_dir: str, target) -> str:
    """The folder of ``cache_dir`` that holds ``target``'s features (created; a new one
    starts from the archive shipped for it, :func:`unpack_shipped`)."""
    folder = os.path.join(cache_dir, f"{_key(str(target))}-v{VERSION}")
    if not os.path.isdir(folder):
        unpack_shipped(folder)
    os.makedirs(folder, exist_ok=True)
    return folder


def module_features(mod, target) -> np.ndarray:
    """Build one scheduled ``IRModule`` for ``target`` and read its assembly's features
    (:func:`asm_features`).

    Raises:
        Exception: Whatever TVM raises when the schedule does not build.
    """
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build

    return asm_features(default_build(mod, target, None).inspect_source("asm"))


def compiled_features(name: str, candidates: list, traces: list[str], target,
                      cache_dir: str) -> np.ndarray:
    """Build each candidate for ``target`` and read its assembly's features; cached.

    Args:
        name: The workload's name (the cache file's).
        candidates: Its ``MeasureCandidate`` s.
        traces: Each candidate's trace JSON (its cache key), in the same order.
        target: The ``tvm.target.Target`` to compile for (any CPU LLVM knows: the code is
            only read, never run).
        cache_dir: Where the features are kept (``<cache_dir>/<hash of the target>-
            v<VERSION>/<workload>.json``).

    Returns:
        An ``n x len(FEATURE_NAMES)`` array; a row of ``nan`` for a schedule that does not
        build (logged, not cached). An unreadable cache file is rebuilt.
    """
    from tuner.engine.intrinsics import load_tensor_intrinsics

    load_tensor_intrinsics((target.kind.name,))  # else default_build imports every backend's
    path = os.path.join(cache_folder(cache_dir, target), name.replace("/", "__") + ".json")
    cached = _read_cache(path, warn=True)
    rows, added = [], False
    for cand, trace in zip(candidates, traces):
        key = _key(trace)
        if key not in cached:
            try:
                features = module_features(cand.sch.mod, target)
            except Exception as e:  # noqa: BLE001 - TVM raises several kinds; a row of nan
                logger.warning("%s: a schedule did not build (%s): its features are nan "
                               "(not cached: tried again next time)", name,
                               str(e).splitlines()[0] if str(e) else type(e).__name__)
                rows.append([float("nan")] * len(FEATURE_NAMES))
                continue
            cached[key], added = features.tolist(), True
        rows.append(cached[key])
    if added:
        from metatune.files import write_json_atomic

        # another process (bench/compile_features.py's workers) may have added entries
        # to the same file since it was read: keep them
        write_json_atomic(path, {**_read_cache(path), **cached})
    return np.array(rows, float)


def _read_cache(path: str, warn: bool = False) -> dict[str, list[float]]:
    """A workload's cache file as a dict (empty when absent or unreadable: a cache, its
    schedules are built again; logged with ``warn``)."""
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            return dict(json.load(f))
    except (OSError, ValueError, TypeError) as e:
        if warn:
            logger.warning("%s: unreadable (%s): its schedules are built again", path, e)
        return {}
