"""The import graph of a Python source tree, read with `ast` (nothing is imported).

An edge A → B says that running module A may run module B: every `import` and
`from … import` counts, at module level or inside a function (a function's
import is still a dependency, only a later one), except those under
`if TYPE_CHECKING:`, which never run. Importing `a.b.c` runs the packages `a`
and `a.b` first, so they are targets too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package whose folder is `root`, by dotted name."""
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join([package, *parts])] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:  # the `else:` of a TYPE_CHECKING block does run
                yield from _import_nodes_of(other)
            continue
        yield from _import_nodes_of(child)


def _import_nodes_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _import_nodes(node)


def _with_parents(name: str) -> Iterator[str]:
    parts = name.split(".")
    for end in range(1, len(parts) + 1):
        yield ".".join(parts[:end])


def imported(module: str, source: str, is_package: bool, known: Iterable[str]) -> set[str]:
    """The modules of `known` that `module` (whose text is `source`) imports."""
    known = set(known)
    package = module if is_package else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in _import_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import name`: name is a submodule, or something defined in pkg.
            names = [base] + [f"{base}.{alias.name}" for alias in node.names
                              if f"{base}.{alias.name}" in known]
        for name in names:
            targets.update(n for n in _with_parents(name) if n in known)
    targets.discard(module)
    return targets


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module → the modules of the same tree it imports."""
    modules = module_names(root, package)
    return {name: imported(name, path.read_text(encoding="utf-8"), path.name == "__init__.py",
                           modules)
            for name, path in modules.items()}


def collapse(graph: Mapping[str, set[str]], group_of) -> dict[str, set[str]]:
    """The graph between groups of modules (`group_of(module)`); no self edges."""
    groups: dict[str, set[str]] = {}
    for source, targets in graph.items():
        edges = groups.setdefault(group_of(source), set())
        edges.update(group_of(t) for t in targets)
    for group, edges in groups.items():
        edges.discard(group)
    return groups


def reachable(graph: Mapping[str, set[str]], start: str) -> set[str]:
    """Every node a path from `start` reaches (`start` itself only through a cycle)."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def path_between(graph: Mapping[str, set[str]], start: str, goal: str) -> list[str] | None:
    """One shortest path start → … → goal, to name in a failure; None if there is none."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph.get(node, ())):
                if target not in previous:
                    previous[target] = node
                    if target == goal:
                        path = [goal]
                        while path[-1] != start or len(path) == 1:
                            path.append(previous[path[-1]])
                        return path[::-1]
                    following.append(target)
        frontier = following
    return None
