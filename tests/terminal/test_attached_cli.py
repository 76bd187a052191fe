"""`noema chat` beside `noema run`, as two processes: the chat attaches,
says so, talks, and leaves the agent running."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pexpect
import pytest

from tests.foundation.test_cli import NOEMA, env_for

pytestmark = pytest.mark.slow

SCRIPT = '[[responses]]\ntext = "I run on my own."\n\n[[responses]]\ntext = "Still running."\n'


def test_a_chat_attaches_to_noema_run_and_leaving_leaves_it_running(tmp_path: Path):
    agent = tmp_path / "agents" / "default"
    agent.mkdir(parents=True)
    (agent / "script.toml").write_text(SCRIPT)
    (agent / "config.toml").write_text("[models.reasoning]\nprovider = 'scripted'\n"
                                       "model = 'script'\nscript = 'script.toml'\n")
    env = env_for(tmp_path)
    run = subprocess.Popen([*NOEMA, "run"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        assert run.stdout is not None
        announced = run.stdout.readline()
        assert "runs (pid" in announced, announced

        def chat() -> pexpect.spawn:
            return pexpect.spawn(NOEMA[0], [*NOEMA[1:], "chat"], env={**env, "TERM": "dumb"},
                                 encoding="utf-8", timeout=30)

        first = chat()
        try:
            first.expect(re.escape(f"attached to the agent running as pid {run.pid}"))
            first.expect("you> ")
            first.sendline("are you there?")
            first.expect("noema> I run on my own.")
            first.sendline("/quit")
            first.expect(pexpect.EOF)
        finally:
            first.close(force=True)
        assert run.poll() is None  # leaving the chat left the agent running

        second = chat()
        try:
            second.expect("attached to the agent")
            second.sendline("and now?")
            second.expect("noema> Still running.")
            second.sendline("/quit")
            second.expect(pexpect.EOF)
        finally:
            second.close(force=True)
        assert "Traceback" not in (first.before or "") + (second.before or "")
    finally:
        run.send_signal(signal.SIGTERM)
        rest, _ = run.communicate(timeout=60)
    assert run.returncode == 0, rest
    assert "stopped (SIGTERM" in rest
