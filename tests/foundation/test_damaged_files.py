"""Damaged files are refused with the way out, never used blindly, never a
traceback; a damaged archive only turns the senses off; a full disk is said."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from noema.health import DamagedDatabase
from noema.health.agent_files import repositories
from noema.health.sqlite_files import check_open
from noema.memory.store import TurnStore
from noema.paths import AgentPaths

from .damage import (
    copy_agent,
    empty,
    garble_page,
    main_table_page,
    make_agent,
    no_traceback,
    noema,
    overwrite_header,
    truncate_half,
)

pytestmark = pytest.mark.slow
NOEMA = [sys.executable, "-m", "noema"]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("template")
    make_agent(base / "home", base / "workspace")
    return base / "home"


@pytest.fixture
def agent(template, tmp_path) -> AgentPaths:
    return copy_agent(template, tmp_path / "home")


def env_for(home: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    return {**clean, "NOEMA_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def chat(home: Path, typed: str = "/quit\n") -> subprocess.CompletedProcess:
    return subprocess.run([*NOEMA, "chat"], input=typed, capture_output=True, text=True,
                          env=env_for(home), timeout=60)


def _middle(path: Path) -> None:
    garble_page(path, main_table_page(path, "turns"))


DAMAGES = {"truncated to half": truncate_half, "header overwritten": overwrite_header,
           "garbage in a middle page": _middle, "emptied": empty}


@pytest.mark.parametrize("damage", DAMAGES)
def test_every_command_refuses_a_damaged_turn_store(agent, damage):
    DAMAGES[damage](agent.turns_db)
    before = agent.turns_db.read_bytes()
    home = agent.root.parent.parent

    started = chat(home)
    assert started.returncode == 1
    assert "turns.db is damaged" in started.stderr and "noema doctor" in started.stderr
    assert "Traceback" not in started.stdout + started.stderr
    for command in (["memory"], ["memory", "search", "heron"], ["memory", "show", "1"]):
        refused = noema(home, *command)
        no_traceback(refused)
        assert refused.exit_code == 1, command
        assert "turns.db is damaged" in refused.output and "noema doctor" in refused.output
    assert agent.turns_db.read_bytes() == before  # nothing was written into it


def test_an_empty_turn_store_of_a_new_agent_is_a_new_conversation(tmp_path):
    paths = AgentPaths.for_agent("default", tmp_path).ensure()
    empty(paths.turns_db)
    listed = noema(tmp_path, "memory")
    assert listed.exit_code == 0, listed.output


def test_a_damaged_archive_leaves_the_conversation_running(agent):
    garble_page(agent.archive_db, main_table_page(agent.archive_db, "events"))
    before = agent.archive_db.read_bytes()
    talk = pexpect.spawn(NOEMA[0], [*NOEMA[1:], "chat"],
                         env={**env_for(agent.root.parent.parent), "TERM": "dumb"},
                         encoding="utf-8", timeout=30)
    try:
        talk.expect("senses are off: .*archive.db is damaged")
        talk.expect("noema doctor")
        talk.expect("you> ")
        talk.sendline("hello")
        talk.expect("Hello again.")
        talk.sendline("/quit")
        talk.expect(pexpect.EOF)
    finally:
        talk.close(force=True)
    assert "Traceback" not in (talk.before or "")
    assert agent.archive_db.read_bytes() == before


def test_history_refuses_a_damaged_repository_instead_of_showing_none(agent):
    (gitdir,) = repositories(agent)
    (gitdir / "refs" / "heads" / "main").write_text("0123456789" * 4 + "\n")
    shown = noema(agent.root.parent.parent, "history")
    no_traceback(shown)
    assert shown.exit_code == 1
    assert "(no versions yet)" not in shown.output
    assert "is damaged" in shown.output and "noema doctor" in shown.output


def test_the_check_on_open_reads_every_page_only_of_small_files(agent):
    garble_page(agent.turns_db, main_table_page(agent.turns_db, "turns"))
    with pytest.raises(DamagedDatabase, match="malformed"):
        TurnStore(agent.turns_db)
    # Above the size limit only the header, the schema and the newest rows are
    # read on open: damage in the middle waits for `noema doctor` to find it.
    with sqlite3.connect(agent.turns_db) as db:
        check_open(db, agent.turns_db, thorough_below=0)
    assert noema(agent.root.parent.parent, "doctor").exit_code == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_starting_on_a_full_disk_says_so(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
    try:
        paths = make_agent(disk / "home", tmp_path / "workspace", turns=20, events=5)
        with pytest.raises(OSError), (disk / "filler").open("wb") as filler:
            while True:
                filler.write(b"x" * 65536)
                filler.flush()
        started = chat(disk / "home")
        assert started.returncode == 1
        assert f"the disk holding {paths.root} is full (" in started.stderr
        assert "bytes free" in started.stderr and "Traceback" not in started.stderr
        checked = noema(disk / "home", "doctor")
        assert checked.exit_code == 1 and "UNCHECKED" in checked.output
        assert "DAMAGED" not in checked.output  # a full disk is not a damaged file
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
        shutil.rmtree(disk, ignore_errors=True)


def test_a_damaged_repository_is_a_warning_when_the_chat_starts(agent):
    (gitdir,) = repositories(agent)
    (gitdir / "refs" / "heads" / "main").write_text("0123456789" * 4 + "\n")
    done = chat(agent.root.parent.parent, "hello\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "warning: the versions repository" in done.stderr and "noema doctor" in done.stderr
    assert "Hello again." in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_a_store_killed_before_its_checkpoint_is_not_taken_for_damage(tmp_path):
    paths = AgentPaths.for_agent("default", tmp_path).ensure()
    killed = ("import os\nfrom noema.memory.store import TurnStore\n"
              "from noema.memory.turns import NewTurn, TurnKind\n"
              f"store = TurnStore({str(paths.turns_db)!r})\n"
              "for i in range(50): store.append(NewTurn(TurnKind.USER, f'heron {i}'))\n"
              "os.kill(os.getpid(), 9)\n")
    subprocess.run([sys.executable, "-c", killed], timeout=60, check=False)
    assert paths.turns_db.with_name("turns.db-wal").stat().st_size > 0  # the turns are there
    checked = noema(tmp_path, "doctor")
    assert checked.exit_code == 0, checked.output
    exported = noema(tmp_path, "memory", "export", str(tmp_path / "turns.jsonl"))
    assert exported.exit_code == 0 and "50 turns written" in exported.output
