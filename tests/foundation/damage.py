"""An agent with real data on disk, and the ways its files get damaged.

Shared by the doctor, damaged-file and configuration tests: every store is
the real one, every damage is done to the real file.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner, Result

from noema.cli import cli
from noema.config import load_config
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.paths import AgentPaths
from noema.perception.archive import SensoryArchive
from noema.perception.events import Event
from noema.privacy import go_private
from noema.tools.hands import build_hands

SCRIPT = '[[responses]]\ntext = "Hello again."\n'
PAGE = 4096


def config_text(workspace: Path) -> str:
    return ("[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
            f"script = 'script.toml'\n[[files.roots]]\npath = '{workspace}'\n")


@contextmanager
def private_umask() -> Iterator[None]:
    """Files made as the `noema` command makes them: under the umask 077."""
    before = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(before)


def make_agent(home: Path, workspace: Path, *, turns: int = 600, events: int = 600) -> AgentPaths:
    """The default agent under `home`: turns, archived events and a versions
    repository with two versions of the workspace, every file private as
    the `noema` command leaves them."""
    with private_umask():
        return _make_agent(home, workspace, turns=turns, events=events)


def _make_agent(home: Path, workspace: Path, *, turns: int, events: int) -> AgentPaths:
    paths = AgentPaths.for_agent("default", home).ensure()
    paths.config_file.write_text(config_text(workspace))
    (paths.root / "script.toml").write_text(SCRIPT)
    store = TurnStore(paths.turns_db)
    for i in range(turns):
        kind = TurnKind.USER if i % 2 == 0 else TurnKind.ASSISTANT
        store.append(NewTurn(kind, f"turn {i}: the heron flew over the river " * 8))
    store.close()
    with SensoryArchive(paths.archive_db) as archive:
        for i in range(events):
            archive.append(Event.create("files", f"file {i} changed " * 6, received_at=1e9 + i),
                           "from:files", 1e9 + i)
    workspace.mkdir(parents=True, exist_ok=True)
    hands = build_hands(load_config(paths, environ={}).hands, paths, watch_changes=False)
    try:
        store_of = hands.versions.store_for(hands.policy.workspace)
        for version in range(2):
            (workspace / "notes.txt").write_text(f"version {version}\n")
            store_of.record_person()
    finally:
        hands.close()
    return paths


def noema(home: Path, *args: str, env: dict[str, str] | None = None,
          input: str | None = None) -> Result:
    """Run the `noema` command as a person would, for agents under `home`
    (under the umask 077 its entry point sets)."""
    clean = {k: None for k in os.environ if k.startswith("NOEMA")}
    previous = os.umask(0o077)
    os.umask(previous)
    go_private()
    try:
        return CliRunner().invoke(cli, list(args), input=input,
                                  env={**clean, "NOEMA_HOME": str(home), **(env or {})})
    finally:
        os.umask(previous)


def pages(path: Path) -> int:
    return path.stat().st_size // PAGE


def truncate_half(path: Path) -> None:
    with path.open("r+b") as file:
        file.truncate(pages(path) // 2 * PAGE)


def overwrite_header(path: Path) -> None:
    with path.open("r+b") as file:
        file.write(b"this is not a database header at all, just words. " * 2)


def garble_page(path: Path, page: int) -> None:
    with path.open("r+b") as file:
        file.seek(page * PAGE)
        file.write(bytes((i * 7 + 13) % 251 for i in range(PAGE)))


def main_table_page(path: Path, table: str) -> int:
    """A page in the middle of a table's leaves (0-based, as an offset in pages)."""
    with sqlite3.connect(path) as db:
        numbers = [r[0] for r in db.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
            (table,))]
    return numbers[len(numbers) // 2] - 1


def empty(path: Path) -> None:
    path.write_bytes(b"")


def no_traceback(result: Result) -> None:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


def copy_agent(template: Path, home: Path) -> AgentPaths:
    """A copy of a template home (its workspace stays shared, unchanged)."""
    shutil.copytree(template, home, symlinks=True)
    return AgentPaths.for_agent("default", home)
