"""The package's import graph has no circles (import-linter's layers contract does not see circles
inside one layer: a knot of six history modules passed it).

grimp (import-linter's own graph builder) reads every import, lazy and ``TYPE_CHECKING`` ones
included: a circle through a type-only import still ties two modules into one.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import grimp

PACKAGES = ("desktop", "advisor")


def import_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan, iterative)."""
    ours = sorted(m for m in graph.modules if m.split(".")[0] in PACKAGES)
    edges = {m: sorted(n for n in graph.find_modules_directly_imported_by(m) if n.split(".")[0] in PACKAGES)
             for m in ours}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles: list[list[str]] = []
    counter = 0
    for root in ours:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            if child < len(targets):
                work.append((node, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return circles


def test_no_import_circle_in_the_package() -> None:
    graph = grimp.build_graph(*PACKAGES)
    assert import_circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    """The check above can fail: a graph with a known knot is reported."""
    graph = grimp.ImportGraph()
    for name in ("desktop", "desktop.a", "desktop.b", "desktop.c", "advisor", "advisor.x"):
        graph.add_module(name)
    graph.add_import(importer="desktop.a", imported="desktop.b")
    graph.add_import(importer="desktop.b", imported="desktop.c")
    graph.add_import(importer="desktop.c", imported="desktop.a")
    graph.add_import(importer="desktop.a", imported="advisor.x")
    assert import_circles(graph) == [["desktop.a", "desktop.b", "desktop.c"]]


# --- one history API (issue 23 item 3) ---------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def protected_history_modules() -> list[str]:
    """The history's private table modules, as import-linter's "protected" contract lists them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c["type"] == "protected" and c["allowed_importers"] == ["desktop.history"]]
    return list(contract["protected_modules"])


def private_imports(source: str, private: list[str]) -> list[str]:
    """The private history modules ``source`` imports (``import a.b``, ``from a import b``, ``from a.b import c``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            private_module = any(node.module == m or node.module.startswith(m + ".") for m in private)
            names = [node.module] if private_module else [f"{node.module}.{alias.name}" for alias in node.names]
        found += [n for n in names if any(n == m or n.startswith(m + ".") for m in private)]
    return found


def test_outside_the_history_package_nobody_imports_its_table_modules() -> None:
    """lint-imports checks desktop/ and advisor/; tools/ and the tests of other packages are read here (the
    history's own tests, tests/unit/history, may test its parts). They call HistoryStore's methods."""
    private = protected_history_modules()
    assert "desktop.history.jobs" in private and "desktop.history.rollup" in private
    own_tests = ROOT / "tests" / "unit" / "history"
    offenders = {}
    for file in [*(ROOT / "tools").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        if own_tests in file.parents or file.parent.name == "bench":  # the benchmarks time the parts themselves
            continue
        if hits := private_imports(file.read_text(encoding="utf-8"), private):
            offenders[str(file.relative_to(ROOT))] = hits
    assert offenders == {}


def test_the_private_import_finder_finds_each_form() -> None:
    """The check above can fail: every import form of a private module is found, a public one is not."""
    private = ["desktop.history.jobs", "desktop.history.rollup"]
    source = ("from desktop.history import jobs as job_store\nimport desktop.history.rollup\n"
              "from desktop.history.rollup import maintain\nfrom desktop.history.store import HistoryStore\n"
              "from desktop.history import job_owner\n")
    assert private_imports(source, private) == ["desktop.history.jobs", "desktop.history.rollup",
                                                "desktop.history.rollup"]


#: Issue 35: a module over this many lines has more than one job; split it along a real seam.
MAX_MODULE_LINES = 400


def long_modules(root: Path, packages: tuple[str, ...] = PACKAGES, limit: int = MAX_MODULE_LINES) -> list[str]:
    """``path: lines`` for every Python file under ``packages`` with more than ``limit`` lines (as ``wc -l``)."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            lines = path.read_bytes().count(b"\n")
            if lines > limit:
                found.append(f"{path.relative_to(root).as_posix()}: {lines}")
    return found


def test_no_module_in_the_package_is_over_400_lines() -> None:
    assert long_modules(Path(__file__).resolve().parents[2]) == []


def test_the_long_module_finder_counts_lines_as_wc_does(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * 400)
    (tmp_path / "pkg" / "sub" / "long.py").write_text("x = 1\n" * 401)
    assert long_modules(tmp_path, ("pkg",)) == ["pkg/sub/long.py: 401"]
