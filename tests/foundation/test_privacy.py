"""Private by default: the `noema` command runs under the umask 077, so the
agent's folder is 0700 and every file it writes there 0600 (databases with
their -wal and -shm files, repositories, logs), while what it writes into the
person's folders gets the person's usual modes. A home left loose by an
older version is tightened at start, with one line saying so.

The command runs as a child process with the umask 022 a person usually has."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

from noema.health.modes import exposed, loose_modes
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.paths import AgentPaths

NOEMA = [sys.executable, "-m", "noema"]
pytestmark = pytest.mark.slow

SCRIPT = """\
[[responses]]
text = "Writing it down."
[[responses.tool_calls]]
name = "file_write"
arguments = { path = "notes/plan.md", content = "the plan" }

[[responses]]
text = "Done."
"""


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    return {**env, "NOEMA_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def run(home: Path, *args: str, typed: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([*NOEMA, *args], input=typed, capture_output=True, text=True,
                          env=env_for(home), timeout=90, umask=0o022)


def talk(home: Path, said: str, answer: str,
         running: Callable[[], None] = lambda: None) -> str:
    """A chat at a terminal: say one thing, wait for the answer, call `running`
    while the agent still runs, leave; what it showed."""
    chat = pexpect.spawn(NOEMA[0], [*NOEMA[1:], "chat"], env={**env_for(home), "TERM": "dumb"},
                         encoding="utf-8", timeout=60, preexec_fn=lambda: os.umask(0o022))
    try:
        chat.expect("you> ")
        shown = chat.before
        chat.sendline(said)
        chat.expect(answer)
        shown += chat.before
        chat.expect("you> ")
        running()
        chat.sendline("/quit")
        chat.expect(pexpect.EOF)
        return shown + chat.before
    finally:
        chat.close(force=True)


def configure(home: Path, workspace: Path) -> AgentPaths:
    paths = AgentPaths.for_agent("default", home)
    paths.root.mkdir(parents=True)
    paths.config_file.write_text(
        "[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\nscript = 'script.toml'\n"
        f"[[files.roots]]\npath = '{workspace}'\n")
    (paths.root / "script.toml").write_text(SCRIPT)
    workspace.mkdir()
    return paths


def modes(root: Path) -> dict[str, int]:
    """Every file and folder below `root` (itself included), by relative path."""
    found = {".": root.lstat().st_mode & 0o777}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = path.lstat().st_mode & 0o777
    return found


def test_everything_the_agent_keeps_is_private_and_the_workspace_keeps_the_persons_modes(
        tmp_path):
    workspace = tmp_path / "workspace"
    with_umask = os.umask(0o077)  # the test's own files: the person's config, made private
    try:
        paths = configure(tmp_path / "home", workspace)
    finally:
        os.umask(with_umask)
    workspace.chmod(0o755)

    while_running: dict[str, int] = {}
    shown = talk(tmp_path / "home", "write the plan", "Done.",
                 lambda: while_running.update(modes(paths.agents_dir)))
    assert "note:" not in shown and "Traceback" not in shown

    for name in ("default/turns.db-wal", "default/turns.db-shm", "default/agent.sock"):
        assert while_running.get(name) == 0o600, (name, while_running.get(name))
    kept = modes(paths.agents_dir)
    for name in ("default/turns.db", "default/archive.db", "default/logs/noema.log",
                 "default/config.toml"):
        assert kept.get(name) == 0o600, (name, kept.get(name))
    assert any(name.startswith("default/versions/") and name.endswith(".git") for name in kept)
    loose = {name: oct(mode) for name, mode in kept.items() if mode & 0o077}
    assert not loose, loose  # nothing for the group or others, repositories included
    # The person's folder: the modes the person's own umask (022) gives.
    assert (workspace / "notes").stat().st_mode & 0o777 == 0o755
    assert (workspace / "notes" / "plan.md").stat().st_mode & 0o777 == 0o644
    assert (workspace / "notes" / "plan.md").read_text() == "the plan"


@pytest.mark.parametrize("folders", ["loose", "private"])
def test_a_loose_home_is_tightened_at_start_with_one_line(tmp_path, folders):
    paths = configure(tmp_path / "home", tmp_path / "workspace")  # made under the umask 022
    store = TurnStore(paths.turns_db)
    store.append(NewTurn(TurnKind.USER, "my mail, which no one else should read"))
    store.close()
    paths.turns_db.chmod(0o644)  # as an older version left it
    if folders == "private":  # only the files inside are loose
        paths.root.chmod(0o700)
        paths.agents_dir.chmod(0o700)
    else:
        assert paths.root.stat().st_mode & 0o077 and paths.agents_dir.stat().st_mode & 0o077

    first = run(tmp_path / "home", "chat", typed="/quit\n")
    assert first.returncode == 0, first.stderr
    notes = [line for line in first.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1, first.stderr
    assert "could be read by other users of this machine; now only you can" in notes[0]
    assert "turns.db" in notes[0]
    assert not {n: m for n, m in modes(paths.agents_dir).items() if m & 0o077}
    log = (paths.logs_dir / "noema.log").read_text()
    assert "could be read by other users" in log

    again = run(tmp_path / "home", "chat", typed="/quit\n")
    assert again.returncode == 0 and "note:" not in again.stderr  # said once


def test_a_first_start_makes_the_persons_new_files_private_without_a_word(tmp_path):
    paths = configure(tmp_path / "home", tmp_path / "workspace")  # config only, 0644
    assert paths.config_file.stat().st_mode & 0o077
    first = run(tmp_path / "home", "chat", typed="/quit\n")
    assert first.returncode == 0, first.stderr
    assert "note:" not in first.stderr  # nothing of the agent's was there to be read
    assert paths.config_file.stat().st_mode & 0o777 == 0o600
    assert "modes: " in (paths.logs_dir / "noema.log").read_text()  # said in the log


def test_the_start_looks_two_levels_deep_and_the_doctor_everywhere(tmp_path):
    paths = AgentPaths.for_agent("default", tmp_path).ensure()
    deep = paths.versions_dir / "ws.git" / "objects" / "ab"
    deep.mkdir(parents=True, mode=0o700)
    for folder in (paths.versions_dir, paths.versions_dir / "ws.git", deep.parent, deep):
        folder.chmod(0o700)
    (deep / "cdef").write_bytes(b"object")
    (deep / "cdef").chmod(0o444)  # loose, but inside private folders: no one else reaches it
    assert not exposed(paths)
    assert [item.path for item in loose_modes(paths)] == [deep / "cdef"]
    (paths.versions_dir / "ws.git").chmod(0o755)  # a repository folder an older version made
    assert exposed(paths)


def test_the_persons_umask_is_remembered_under_the_private_one():
    probe = ("import os\n"
             "from noema.privacy import go_private, person_umask, workspace_file_mode,"
             " workspace_folder_mode\n"
             "print(oct(go_private()), oct(go_private()), oct(person_umask()))\n"
             "now = os.umask(0); print(oct(now))\n"
             "print(oct(workspace_file_mode()), oct(workspace_folder_mode()))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, umask=0o027, check=True)
    assert done.stdout.split() == ["0o27", "0o27", "0o27", "0o77", "0o640", "0o750"]
