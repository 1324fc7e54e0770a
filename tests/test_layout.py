"""The house rules of DESIGN.md, checked on the source: the import graph of the package (every import
statement, inside functions and ``TYPE_CHECKING`` blocks too) has no cycle and no import from a lower stage to
a higher one; no file is over 450 lines; every benchmark script still imports; docs/layout.md (which the README
links) names every subpackage; the paths other packages import keep working."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "iso_bench"

# DESIGN.md's stages, highest first: an import may run down this list or stay within a stage, never up.
STAGES: tuple[tuple[str, ...], ...] = (
    ("cli", "__main__"),
    ("grid",),
    ("mteb_plugin", "_hooks"),
    ("report",),
    ("export",),
    ("encoder", "fitting"),
    ("results",),
    ("kinds", "vectors", "backbones", "checks", "tasks"),
    ("methods", "data"),
    ("numerics",),
    ("outputs",),
    ("files", "registry", "faults", "_version", "kernels"),
)
# top-level modules that only hand names on to packages outside iso-bench; nothing inside imports them
SHIMS = ("cards",)
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    """Every module of the installed package, by dotted name (``tasks/`` is installed as ``iso_bench.tasks``)."""
    out = {}
    for base, prefix in ((PACKAGE, "iso_bench"), (ROOT / "tasks", "iso_bench.tasks")):
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([prefix, *parts])] = path
    return out


def import_graph() -> dict[str, dict[str, int]]:
    """``{module: {imported module: line}}`` over every import statement of the package."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = defaultdict(dict)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target.startswith("iso_bench") and target != name:
                    while target not in modules and "." in target:
                        target = target.rpartition(".")[0]
                    if target in modules and target != name:
                        graph[name].setdefault(target, node.lineno)
    return graph


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _stage(module: str) -> int | None:
    top = _top(module)
    return next((i for i, names in enumerate(STAGES) if top in names), None)


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return found


def _where(graph: dict[str, dict[str, int]], a: str, b: str) -> str:
    return f"{_modules()[a].relative_to(ROOT)}:{graph[a][b]} imports {b}"


def test_every_module_has_a_stage() -> None:
    unplaced = sorted(m for m in _modules() if _stage(m) is None and _top(m) not in ("", *SHIMS))
    assert not unplaced, f"modules outside DESIGN.md's stages (add the folder to STAGES and DESIGN.md): {unplaced}"


def test_no_import_cycle() -> None:
    graph = import_graph()
    cycles = _cycles(graph)
    lines = []
    for component in cycles:
        members = set(component)
        lines += [_where(graph, a, b) for a in component for b in graph.get(a, {}) if b in members]
    assert not cycles, "import cycles:\n" + "\n".join(lines)


def test_no_cycle_between_stages() -> None:
    """Two folders or top-level modules never import each other, even through different files."""
    graph = import_graph()
    tops: dict[str, dict[str, int]] = defaultdict(dict)
    for a, targets in graph.items():
        for b in targets:
            if _top(a) and _top(b) and _top(a) != _top(b):
                tops[_top(a)][_top(b)] = 1
    cycles = _cycles(tops)
    assert not cycles, f"subpackages or modules that import each other: {cycles}"


def test_imports_run_down_the_stages() -> None:
    graph = import_graph()
    upward = [_where(graph, a, b) for a, targets in graph.items() for b in targets
              if _stage(a) is not None and _stage(b) is not None and _stage(b) < _stage(a)]
    assert not upward, "imports from a lower stage to a higher one (DESIGN.md):\n" + "\n".join(sorted(upward))


def test_nothing_inside_imports_a_shim() -> None:
    graph = import_graph()
    inside = [_where(graph, a, b) for a, targets in graph.items() for b in targets if _top(b) in SHIMS]
    assert not inside, "modules that import a path kept only for other packages:\n" + "\n".join(inside)


def test_no_file_over_the_limit() -> None:
    long = [f"{p.relative_to(ROOT)}: {n} lines" for folder in ("iso_bench", "tasks", "tests", "benchmarks")
            for p in sorted((ROOT / folder).rglob("*.py")) if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, f"files over {MAX_LINES} lines (DESIGN.md):\n" + "\n".join(long)


def test_the_graph_reader_sees_function_level_and_type_checking_imports() -> None:
    """The reader itself: an import inside a function and one under TYPE_CHECKING both count, and a cycle
    through three modules is found while a module that only points into it is not part of it."""
    graph = import_graph()
    assert "iso_bench.encoder" in graph["iso_bench.grid.runner"]  # imported inside a function there
    assert "iso_bench.numerics.outliers" in graph["iso_bench.report"]  # under TYPE_CHECKING there
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py")))
def test_benchmark_script_imports(script: str) -> None:
    """A benchmark script imports (its module body runs; ``main`` is not called), so a moved name shows here."""
    spec = importlib.util.spec_from_file_location(f"bench_{script[:-3]}", ROOT / "benchmarks" / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]  # raises on a top-level name that moved
    assert callable(getattr(module, "main", None)), f"{script} has no main()"


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py")))
def test_benchmark_script_function_imports_resolve(script: str) -> None:
    """Every ``iso_bench`` name a benchmark script imports, at the top or inside a function, exists."""
    missing = []
    for node in ast.walk(ast.parse((ROOT / "benchmarks" / script).read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("iso_bench"):
            module = importlib.import_module(node.module)
            missing += [f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)
                        and importlib.util.find_spec(f"{node.module}.{a.name}") is None]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("iso_bench") and importlib.util.find_spec(alias.name) is None:
                    missing.append(alias.name)
    assert not missing, f"{script} imports names that do not exist: {missing}"


def test_readme_layout_names_every_subpackage() -> None:
    layout = (ROOT / "docs" / "layout.md").read_text()  # the README links it
    assert "(docs/layout.md)" in (ROOT / "README.md").read_text()
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    unnamed = [p for p in packages if not re.search(rf"\b{re.escape(p)}/", layout)]
    assert not unnamed, f"docs/layout.md does not name these subpackages: {unnamed}"


def test_paths_other_packages_import_still_work() -> None:
    """Task packages import ``iso_bench.cards`` and ``iso_bench.data.RawSource``; users ``iso_bench.methods``
    and ``iso_bench.report``: each hands on the very objects of their new home."""
    code = ("import iso_bench.cards as c, iso_bench.data as d, iso_bench.kinds.cards as kc, "
            "iso_bench.data.sources as s, iso_bench.methods as m, iso_bench.report as r;"
            "assert c.TaskCard is kc.TaskCard and c.cards is kc.cards and c.Group is kc.Group;"
            "assert d.RawSource is s.RawSource and d.DataFormatError.__module__ == 'iso_bench.data.mirror_check';"
            "assert callable(m.make_method) and callable(r.read_results)")
    subprocess.run([sys.executable, "-c", code], check=True)
