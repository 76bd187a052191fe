"""An idle `noema run` holds neither pygit2 nor cryptography: the workspace's
state at start is recorded by a child process, and python-telegram-bot is
loaded without Passport's cryptography. Both are native libraries that show
in the process's memory map, so this is checked from outside, on the real
command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from noema.paths import AgentPaths
from noema.security.versions import gitdir_for
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer

WAIT = 30.0


def mapped_libraries(pid: int) -> set[str]:
    return {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if line.split()[-1].startswith("/")}


def test_an_idle_agent_maps_no_history_library_and_no_cryptography(tmp_path: Path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.md").write_text("# Notes\n")
    paths = AgentPaths.for_agent("default", tmp_path).ensure()
    (paths.root / "script.toml").write_text('[[responses]]\ntext = "unused"\n')
    with FakeTelegramServer() as telegram:
        paths.config_file.write_text(
            "[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
            "script = 'script.toml'\n"
            f"[[files.roots]]\npath = '{workspace}'\nmode = 'read-write'\n"
            f"[telegram]\nchat_ids = [42]\nbase_url = '{telegram.base_url}'\n")
        (paths.root / "secrets.toml").write_text(f'TELEGRAM_BOT_TOKEN = "{TOKEN}"\n')
        (paths.root / "secrets.toml").chmod(0o600)
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
        env.update(NOEMA_HOME=str(tmp_path), HOME=str(tmp_path))
        agent = subprocess.Popen([sys.executable, "-m", "noema", "run"], env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        try:
            first = agent.stderr.readline()
            while first.startswith("note: "):  # the test's home, made loose, is tightened first
                first = agent.stderr.readline()
            assert "runs (pid" in first
            gitdir = gitdir_for(paths.versions_dir, workspace.resolve())
            deadline = time.monotonic() + WAIT
            recorded = ""
            while time.monotonic() < deadline and not (
                    recorded and telegram.calls("getMe") >= 1):
                if (gitdir / "HEAD").exists():
                    recorded = subprocess.run(
                        ["git", "--git-dir", str(gitdir), "log", "--format=%s"],
                        capture_output=True, text=True).stdout
                time.sleep(0.1)
            assert "Initial state of the workspace: notes.md" in recorded
            assert telegram.calls("getMe") >= 1  # the Telegram library is loaded and in use
            libraries = mapped_libraries(agent.pid)
            # the map is read right: a native library the agent does use is there
            assert [lib for lib in libraries if "/pydantic_core/" in lib]
            assert not [lib for lib in libraries if "libgit2" in lib or "pygit2" in lib]
            assert not [lib for lib in libraries if "/cryptography/" in lib]
            agent.send_signal(signal.SIGTERM)
            assert agent.wait(WAIT) == 0
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
