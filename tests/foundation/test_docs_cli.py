"""`noema docs index` through click's runner, over real documents."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from noema.cli import cli
from noema.docs import samples
from noema.docs.settings import DocsSettings
from noema.interfaces.commands.docs import index_command
from noema.paths import AgentPaths
from noema.security.settings import FilesSettings

SECTIONS = [(1, "Methods", ["Forty ponds were sampled."]), (1, "Results", ["Newts."])]


def library(tmp_path: Path) -> tuple[Path, Path]:
    """A read-only root holding a library: two good documents, a broken PDF and
    a file the deny rules refuse."""
    root = tmp_path / "root"
    folder = root / "papers"
    folder.mkdir(parents=True)
    samples.write_markdown(folder / "notes.md", "Notes", SECTIONS)
    samples.write_pdf(folder / "thesis.pdf", "Thesis", SECTIONS)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a pdf at all")
    samples.write_markdown(folder / ".env.md", "Env", SECTIONS)
    return root, folder


def configure(home: Path, text: str) -> None:
    agent = home / "agents" / "default"
    agent.mkdir(parents=True)
    (agent / "config.toml").write_text(text)


def run(home: Path, *args: str):
    return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)


def test_docs_index_reports_each_kind_of_outcome(tmp_path):
    root, folder = library(tmp_path)
    home = tmp_path / "home"
    configure(home, f'[[files.roots]]\npath = "{root}"\nmode = "read-only"\n\n'
                    f'[docs]\nfolders = ["{folder}"]\n')
    first = run(home, "docs", "index")
    assert first.exit_code == 0, first.output
    out = first.stdout
    assert re.search(r"Indexed in \d+\.\d s: 2 new, 0 changed, 0 unchanged, 0 removed, "
                     r"1 failed, 1 refused by the access policy\.", out), out
    assert "The library holds 2 documents in 5 sections" in out
    assert re.search(r"failed:\n  \S*broken\.pdf: could not be read as pdf: ", out), out
    assert re.search(r"refused by the access policy \(never indexed\):\n  \S*\.env\.md: it "
                     r"matches the deny rule", out), out
    assert (home / "agents" / "default" / "docs.db").is_file()

    (folder / "notes.md").unlink()
    second = run(home, "docs", "index")
    assert second.exit_code == 0, second.output
    assert "0 new, 0 changed, 1 unchanged, 1 removed, 1 failed" in second.stdout


def test_docs_index_without_folders_says_how_to_add_them(tmp_path):
    home = tmp_path / "home"
    configure(home, "")
    result = run(home, "docs", "index")
    assert result.exit_code != 0
    assert "No document folder is configured" in result.output
    assert "[docs]" in result.output


def test_the_progress_bar_counts_the_files(tmp_path):
    root, folder = library(tmp_path)
    paths = AgentPaths.for_agent("default", tmp_path / "home")
    files = FilesSettings(roots=[{"path": root, "mode": "read-only"}])
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    report, text = index_command(DocsSettings(folders=[str(folder)]), files, paths,
                                 console=console)
    assert "indexing" in screen.getvalue() and "3/3" in screen.getvalue()
    assert text.startswith("Indexed in ") and report.pages > 0


def test_config_check_knows_the_library_tools_only_when_folders_are_set(tmp_path):
    root, folder = library(tmp_path)
    levels = '[autonomy.tools]\ndocument_search = "deny"\n'
    with_docs, without = tmp_path / "with", tmp_path / "without"
    configure(with_docs, f'[[files.roots]]\npath = "{root}"\nmode = "read-only"\n\n'
                         f'[docs]\nfolders = ["{folder}"]\n\n{levels}')
    configure(without, f'[[files.roots]]\npath = "{root}"\nmode = "read-only"\n\n{levels}')
    accepted = CliRunner().invoke(cli, ["--home", str(with_docs), "config", "check"])
    assert accepted.exit_code == 0, accepted.output
    assert not (with_docs / "agents" / "default" / "docs.db").exists()  # nothing touched
    refused = CliRunner().invoke(cli, ["--home", str(without), "config", "check"])
    assert refused.exit_code == 1 and "document_search" in refused.output


async def test_the_running_agent_offers_the_library_and_keeps_it_fresh(tmp_path):
    from noema.app import build_app
    from noema.config import Config
    from noema.providers.scripted import ScriptedProvider, say

    root, folder = library(tmp_path)
    workspace = tmp_path / "ws"
    config = Config(files=FilesSettings(roots=[{"path": workspace},
                                               {"path": root, "mode": "read-only"}]),
                    docs=DocsSettings(folders=[str(folder)]))
    paths = AgentPaths.for_agent("reader", tmp_path / "home")
    app = build_app(paths, config, provider=ScriptedProvider([say("ok")]))
    try:
        assert {"document_search", "get_document_structure", "get_partial_document"} <= set(
            app.tools.names())
        await app.start()
        store = app.docs.library.store
        for _ in range(1500):  # the first pass runs as the agent starts
            if store.counts()[0] == 2:
                break
            await asyncio.sleep(0.02)
        assert store.counts()[0] == 2
        samples.write_markdown(folder / "later.md", "Later", SECTIONS)
        for _ in range(1500):  # the watcher's pass after the new file
            if store.counts()[0] == 3:
                break
            await asyncio.sleep(0.02)
        assert store.counts()[0] == 3
    finally:
        await app.aclose()
