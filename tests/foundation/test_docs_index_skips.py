"""`noema docs index` says what it left out: a configured folder it cannot
use makes it exit non-zero, and the files it skips are listed with why."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from noema.cli import cli
from noema.docs import samples
from noema.docs.indexer import Status
from noema.docs.settings import DocsSettings
from noema.interfaces.commands.docs import index_command
from noema.paths import AgentPaths
from noema.security.settings import FilesSettings

SECTIONS = [(1, "Methods", ["Forty ponds were sampled."])]


def folder_with_extras(root: Path) -> Path:
    folder = root / "papers"
    folder.mkdir(parents=True)
    samples.write_markdown(folder / "notes.md", "Notes", SECTIONS)
    (folder / "analysis.py").write_text("print('not a document')\n")
    (folder / "shortcut.md").symlink_to(folder / "notes.md")
    (folder / ".ssh").mkdir()
    samples.write_markdown(folder / ".ssh" / "hidden.md", "Hidden", SECTIONS)
    return folder


def run(home: Path, config: str):
    agent = home / "agents" / "default"
    agent.mkdir(parents=True)
    (agent / "config.toml").write_text(config)
    return CliRunner().invoke(cli, ["--home", str(home), "docs", "index"],
                              catch_exceptions=False)


def test_a_folder_outside_the_roots_makes_the_pass_fail_and_is_named(tmp_path):
    root = tmp_path / "root"
    folder = folder_with_extras(root)
    outside, missing = tmp_path / "outside", root / "not-there"
    outside.mkdir()
    done = run(tmp_path / "home", f'[[files.roots]]\npath = "{root}"\nmode = "read-only"\n'
                                  f'[docs]\nfolders = ["{folder}", "{outside}", "{missing}"]\n')
    assert done.exit_code == 1, done.output
    out = done.stdout
    assert "1 new" in out and "2 folders not indexed" in out
    assert f"\n  {outside}: it is outside the folders you may use" in out
    assert f"\n  {missing}: the folder does not exist" in out
    assert "The library holds 1 documents" in out  # what could be indexed still was


def test_skipped_files_are_listed_with_their_reason_and_a_full_pass_exits_zero(tmp_path):
    root = tmp_path / "root"
    folder = folder_with_extras(root)
    done = run(tmp_path / "home", f'[[files.roots]]\npath = "{root}"\nmode = "read-only"\n'
                                  f'[docs]\nfolders = ["{folder}"]\n')
    assert done.exit_code == 0, done.output
    out = done.stdout
    assert "3 skipped" in out and "skipped (not documents):" in out
    assert f"  {folder / 'analysis.py'}: no reader for .py files (documents are " in out
    assert f"  {folder / 'shortcut.md'}: a symbolic link (links are never followed)" in out
    assert f"  {folder / '.ssh'}: a folder not entered: it matches the deny rule" in out
    assert "hidden.md" not in out


def test_many_skipped_files_are_counted_past_the_first_twenty(tmp_path):
    root = tmp_path / "root"
    folder = root / "code"
    folder.mkdir(parents=True)
    for n in range(25):
        (folder / f"module{n:02}.py").write_text("")
    paths = AgentPaths.for_agent("default", tmp_path / "home")
    files = FilesSettings(roots=[{"path": root, "mode": "read-only"}])
    report, text = index_command(DocsSettings(folders=[str(folder)]), files, paths)
    assert report.count(Status.SKIPPED) == 25 and report.complete
    assert "  … and 5 more" in text and text.count(": no reader for .py files") == 20
