"""The package's import graph has no circles (import-linter's layers contract does not see circles
inside one layer: a knot of six history modules passed it).

grimp (import-linter's own graph builder) reads every import, lazy and ``TYPE_CHECKING`` ones
included: a circle through a type-only import still ties two modules into one.
"""

from __future__ import annotations

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
