"""The project's imports go one way, in the layers of ``docs/ARCHITECTURE.md``, without circles.

The graph is read from the source with :mod:`ast`, nothing is imported: every ``import``
counts, at module level or inside a function (a function-local import closes a circle
as surely when the function runs). An edge goes to the module named, or to the package
whose ``__init__`` holds the name (``from tuner.models import COST_MODELS``); the parent
packages Python runs first are not edges of their own.

Run as a script to print the layers' edges (``python tests/test_imports.py``).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The project's packages and folders of scripts (a missing one is skipped).
PACKAGES = ("metatune", "lightning_modules", "datamodules", "tuner", "bench", "experiments",
            "scripts")
#: The entry points: every script at the repository's root (tune.py, train.py, ...).
ENTRY_POINTS = tuple(sorted(p.stem for p in ROOT.glob("*.py")))

#: Each layer and the layers it may import (its own included).
CORE, TRAINING, ENGINE, MODELS, SEARCH, APP = ("core", "training", "engine", "models", "search",
                                               "app")
ENTRY, BENCH, EXPERIMENTS, SCRIPTS = "entry", "bench", "experiments", "scripts"
PRODUCT = (CORE, TRAINING, ENGINE, MODELS, SEARCH, APP)
ALLOWED: dict[str, set[str]] = {
    CORE: {CORE},  # metatune/ imports nothing else of the project
    TRAINING: {CORE, TRAINING},  # lightning_modules/ + datamodules/: the core only
    ENGINE: {CORE, ENGINE},  # MetaSchedule plumbing: not app, models, search
    MODELS: {CORE, ENGINE, MODELS},  # not search: a cost model reaches it as a CostModel
    SEARCH: {CORE, ENGINE, SEARCH},  # not models
    APP: {CORE, ENGINE, MODELS, SEARCH, APP},  # nothing of Lightning
    ENTRY: {*PRODUCT},  # nothing imports an entry point
    BENCH: {*PRODUCT, BENCH},  # the maintained benchmarks: not the experiments
    EXPERIMENTS: {*PRODUCT, BENCH, EXPERIMENTS},
    SCRIPTS: {*PRODUCT, BENCH, EXPERIMENTS, SCRIPTS},
}


def layer(module: str) -> str:
    """The layer of a module of the project, by its dotted name."""
    top, _, rest = module.partition(".")
    if top == "metatune":
        return CORE
    if top in ("lightning_modules", "datamodules"):
        return TRAINING
    if top == "tuner":
        # tuner/__init__.py sizes TVM's thread pool from the engine's host cores
        return {"models": MODELS, "search": SEARCH, "app": APP}.get(rest.split(".")[0], ENGINE)
    if top in ENTRY_POINTS:
        return ENTRY
    return {"bench": BENCH, "experiments": EXPERIMENTS, "scripts": SCRIPTS}[top]


def project_files() -> dict[str, Path]:
    """Every Python module of the project: dotted name -> file."""
    files: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join(parts)] = path
    for name in ENTRY_POINTS:
        files[name] = ROOT / f"{name}.py"
    return files


def _known(name: str, files: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is a module of the project."""
    while name:
        if name in files:
            return name
        name = name.rpartition(".")[0]
    return None


def module_imports(module: str, path: Path, files: dict[str, Path]) -> set[str]:
    """The project's modules that one module imports, at any depth of its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(filter(None, (_known(a.name, files) for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package, up level - 1
                base = package[:len(package) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.update(filter(None, (_known(f"{source}.{a.name}", files)
                                       for a in node.names)))
    found.discard(module)
    return found


def import_graph() -> dict[str, set[str]]:
    """The project's import graph: module -> the project's modules it imports."""
    files = project_files()
    return {m: module_imports(m, p, files) for m, p in files.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (``[a, b, ..., a]``) through each strongly connected group of modules.

    Tarjan's algorithm, iterative; a group of one module counts only if it imports itself.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph.get(node, ()):
                    groups.append(sorted(group))
    return [_circle(graph, set(group)) for group in groups]


def _circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest circle through the first module of a strongly connected group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == start:
                    return paths[node] + [start]
                if child not in paths:
                    paths[child] = paths[node] + [child]
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"no circle in {sorted(group)}")  # pragma: no cover


def layer_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """Imports between layers: (layer, imported layer) -> ``module -> module`` lines."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, imported in sorted(graph.items()):
        for other in sorted(imported):
            if layer(module) != layer(other):
                edges[layer(module), layer(other)].append(f"{module} -> {other}")
    return dict(edges)


def test_the_graph_reads_every_kind_of_import():
    graph = import_graph()
    assert "tuner.registration" in graph["tuner"]  # a package's own __init__
    assert "tuner.app.collect" in graph["collect"]  # an entry point's lazy import
    assert "tuner.models" in graph["tuner.app.config"]  # a name of a package's __init__
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"a"}, "b": set()}) == [["a", "a"]]


def test_no_import_circles():
    cycles = find_cycles(import_graph())
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_imports_follow_the_layers():
    wrong = [line for (src, dst), lines in layer_edges(import_graph()).items()
             if dst not in ALLOWED[src] for line in lines]
    assert not wrong, ("imports against docs/ARCHITECTURE.md's layers:\n" + "\n".join(wrong))


if __name__ == "__main__":  # the layers' edges, for docs/ARCHITECTURE.md
    for (src, dst), lines in sorted(layer_edges(import_graph()).items()):
        print(f"{src} -> {dst}: {len(lines)}", file=sys.stdout)
        for line in lines:
            print("   ", line)
