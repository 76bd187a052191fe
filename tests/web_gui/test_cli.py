"""`noema ui` as a person runs it: the address printed, the page served, Ctrl-C
stops it cleanly; a public address is refused."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import httpx
import pexpect

WAIT = 60  # seconds: the first import of everything is slow on a shared machine


def _env(home) -> dict[str, str]:
    return {**os.environ, "NOEMA_HOME": str(home)}


def _configure(home, tmp_path) -> None:
    script = tmp_path / "script.toml"
    script.write_text('[[responses]]\ntext = "hi"\n')
    folder = home / "agents" / "default"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        f'[models.reasoning]\nprovider = "scripted"\nmodel = "s"\nscript = "{script}"\n'
        f'[files]\nroots = [{{ path = "{tmp_path / "ws"}" }}]\n'
        "[perception]\nenabled = false\n")


def test_noema_ui_prints_its_address_and_stops_on_ctrl_c(tmp_path):
    home = tmp_path / "home"
    _configure(home, tmp_path)
    child = pexpect.spawn(sys.executable, ["-m", "noema", "ui", "--port", "0"], env=_env(home),
                          encoding="utf-8", timeout=WAIT)
    try:
        child.expect(r"Open (http://127\.0\.0\.1:\d+/\?token=\S+)")
        address = child.match.group(1)
        assert "the agent runs here" in child.before
        token = re.search(r"token=(\S+)", address).group(1)
        assert (home / "agents" / "default" / "ui-token").read_text().strip() == token
        response = httpx.get(address, follow_redirects=False, timeout=20)
        assert response.status_code == 303 and "HttpOnly" in response.headers["set-cookie"]
        child.kill(signal.SIGINT)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert not (home / "agents" / "default" / "agent.sock").exists()


def test_noema_ui_refuses_a_public_address(tmp_path):
    home = tmp_path / "home"
    _configure(home, tmp_path)
    done = subprocess.run([sys.executable, "-m", "noema", "ui", "--host", "0.0.0.0"],
                          env=_env(home), capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 1
    assert "can be reached from other machines" in done.stderr
    assert "--allow-remote" in done.stderr


def test_noema_ui_refuses_an_agent_another_process_runs_without_a_socket(tmp_path):
    """An in-process `noema chat` holds the agent's lock and serves no socket:
    `noema ui` must not start a second agent on the same session."""
    from noema.paths import AgentLock, AgentPaths

    home = tmp_path / "home"
    _configure(home, tmp_path)
    lock = AgentLock(AgentPaths.for_agent("default", home))
    try:
        done = subprocess.run([sys.executable, "-m", "noema", "ui", "--port", "0"],
                              env=_env(home), capture_output=True, text=True, timeout=WAIT)
    finally:
        lock.release()
    assert done.returncode == 1
    assert "is already running" in done.stderr and "Open http" not in done.stdout


def test_noema_ui_logs_to_the_agent_s_folder_and_to_the_terminal_with_verbose(tmp_path):
    home = tmp_path / "home"
    _configure(home, tmp_path)
    child = pexpect.spawn(sys.executable, ["-m", "noema", "-v", "ui", "--port", "0"],
                          env=_env(home), encoding="utf-8", timeout=WAIT)
    try:
        child.expect(r"Open http://127\.0\.0\.1:\d+/")
        shown = child.before  # what the terminal got while the agent started
        child.kill(signal.SIGINT)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    log = home / "agents" / "default" / "logs" / "noema.log"
    assert log.exists() and log.read_text().strip()
    assert "serving interfaces on" in log.read_text()
    assert "serving interfaces on" in shown  # an INFO line: only -v brings it to the terminal
