"""The layers of `noema`: what may import what, read from the source with `ast`.

The composition root (`app`) and the command line (`cli`) sit on top, the
interfaces (each subpackage a room of its own) under them, and the packages
that do the work (memory, orchestrator, perception…) below: those never reach
up. A failure names the modules whose imports break the rule.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import noema

from .imports import collapse, import_graph, imported, path_between, reachable

ROOT = Path(noema.__file__).parent
PACKAGE = "noema"

# Groups that must not be in an import cycle with each other (or anything else).
ACYCLIC = ("app", "cli", "channels", "demo")
# Groups below the interfaces: they never import interfaces, app or cli.
BELOW = ("channels", "memory", "orchestrator", "perception", "security", "tools", "providers")
ABOVE = ("app", "cli")


def group_of(module: str) -> str:
    """`noema.interfaces.web.app` → `interfaces.web`; `noema.memory.store` → `memory`;
    a module straight in `interfaces/` is the group `interfaces`."""
    parts = module.split(".")[1:]
    if not parts:
        return PACKAGE
    if parts[0] == "interfaces" and len(parts) > 1 and (ROOT / "interfaces" / parts[1]).is_dir():
        return ".".join(parts[:2])
    return parts[0]


@pytest.fixture(scope="module")
def modules() -> dict[str, set[str]]:
    return import_graph(ROOT, PACKAGE)


@pytest.fixture(scope="module")
def groups(modules) -> dict[str, set[str]]:
    return collapse(modules, group_of)


def _culprits(modules: dict[str, set[str]], source: str, target: str) -> list[str]:
    """The module imports that make the group edge source → target."""
    return sorted(f"{m} → {t}" for m, ts in modules.items() if group_of(m) == source
                  for t in ts if group_of(t) == target)


def _explain(modules: dict[str, set[str]], path: list[str]) -> str:
    hops = [f"{a} → {b}: {', '.join(_culprits(modules, a, b)[:3])}" for a, b in zip(path, path[1:])]
    return "\n  ".join([" → ".join(path), *hops])


def test_the_graph_sees_the_imports_it_must(modules, groups) -> None:
    # Without this an empty graph would pass every rule below.
    assert "noema.app" in modules["noema.cli"]
    assert "app" in groups["cli"] and "memory" in groups["app"]
    assert len(modules) > 100


def _watched(groups: dict[str, set[str]]) -> list[str]:
    return sorted(g for g in groups if g in ACYCLIC or g.startswith("interfaces"))


def test_no_import_cycle_through_the_top_or_the_interfaces(modules, groups) -> None:
    cycles = []
    for group in _watched(groups):
        if group in reachable(groups, group):
            cycles.append(_explain(modules, path_between(groups, group, group)))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("lower", BELOW)
def test_the_working_packages_never_reach_up(modules, groups, lower) -> None:
    above = {g for g in groups if g in ABOVE or g == "interfaces" or g.startswith("interfaces.")}
    reached = sorted(reachable(groups, lower) & above)
    assert not reached, "\n".join(_explain(modules, path_between(groups, lower, g))
                                  for g in reached)


@pytest.mark.parametrize("room", ["interfaces.host", "interfaces.terminal"])
def test_the_host_and_the_terminal_are_handed_an_app_never_build_one(modules, groups, room) -> None:
    # They name `App` for types only; `noema run`, `noema chat` and `noema ui` build it.
    assert room in groups, f"{room} is no package: the rule names the room it guards"
    assert not {"app", "cli"} & groups[room], _culprits(modules, room, "app") + _culprits(
        modules, room, "cli")


@pytest.mark.parametrize(("one", "other"), [("interfaces.terminal", "interfaces.web"),
                                            ("interfaces.web", "interfaces.terminal")])
def test_the_terminal_and_the_web_page_do_not_import_each_other(modules, groups, one, other) -> None:
    assert one in groups, f"{one} is no package: the rule names the room it guards"
    assert other not in groups[one], _culprits(modules, one, other)


# -- the graph itself, on small sources -----------------------------------------------

KNOWN = {"p", "p.a", "p.b", "p.sub", "p.sub.c", "p.sub.d"}


def _imports(source: str, module: str = "p.sub.c", is_package: bool = False) -> set[str]:
    return imported(module, textwrap.dedent(source), is_package, KNOWN)


def test_relative_imports_resolve_from_the_module_s_package() -> None:
    assert _imports("from . import d") == {"p", "p.sub", "p.sub.d"}
    assert _imports("from ..a import x") == {"p", "p.a"}
    assert _imports("from .. import b") == {"p", "p.b"}
    assert _imports("from .d import x", module="p.sub", is_package=True) == {"p", "p.sub.d"}


def test_a_name_that_is_no_module_counts_as_its_package() -> None:
    assert _imports("from p.sub import Thing") == {"p", "p.sub"}
    assert _imports("import os\nfrom collections import deque") == set()


def test_type_checking_imports_do_not_count_but_function_imports_do() -> None:
    source = """
        from typing import TYPE_CHECKING
        import typing
        if TYPE_CHECKING:
            from p.a import A
        else:
            from p.sub import d
        if typing.TYPE_CHECKING:
            import p.b
        def later():
            from ..b import B
        class K:
            def m(self):
                import p.a
    """
    assert _imports(source) == {"p", "p.sub", "p.sub.d", "p.b", "p.a"}
    assert _imports("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import p.a\n") == set()


def test_a_cycle_is_found_and_named() -> None:
    graph = {"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}
    assert "x" in reachable(graph, "x") and "w" not in reachable(graph, "x")
    assert path_between(graph, "x", "x") == ["x", "y", "z", "x"]
    assert path_between(graph, "x", "w") is None
