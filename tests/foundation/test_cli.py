"""The `noema` command, driven as a person would: demo, config, chat."""

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest
from click.testing import CliRunner

from noema.cli import cli

pytestmark = pytest.mark.slow
NOEMA = [sys.executable, "-m", "noema"]


def env_for(home: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    return {**clean, "NOEMA_HOME": str(home), "HOME": str(home), "PYTHONUNBUFFERED": "1"}


@contextmanager
def chat_with(home: Path, config: str, **files: str) -> Iterator[pexpect.spawn]:
    """`noema chat` in a pty for the default agent under `home`, with this
    config.toml and these extra files in the agent's folder. TERM=dumb keeps
    the chat in its plain line mode, whose output these tests read; the full
    terminal interface has its own tests (tests/terminal)."""
    agent_dir = home / "agents" / "default"
    agent_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (agent_dir / name).write_text(text)
    (agent_dir / "config.toml").write_text(config)
    chat = pexpect.spawn(NOEMA[0], NOEMA[1:] + ["chat"], env={**env_for(home), "TERM": "dumb"},
                         encoding="utf-8", timeout=30)
    try:
        yield chat
    finally:
        chat.close(force=True)


def test_the_demo_runs_offline_end_to_end(tmp_path):
    done = subprocess.run([*NOEMA, "demo", "--pace", "0"], capture_output=True, text=True,
                          env=env_for(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "get_current_time" in out and "not valid JSON" in out
    assert "*** kill -9 ***" in out and "died with signal 9" in out
    assert "ended in the middle of a reply" in out
    assert "Where the data lives" in out
    assert "Traceback" not in out + done.stderr


def test_config_commands(tmp_path):
    runner = CliRunner()
    env = env_for(tmp_path)
    result = runner.invoke(cli, ["--agent", "ana", "config", "check"], env=env)
    assert result.exit_code == 0 and "no model is configured" in result.output
    result = runner.invoke(cli, ["--agent", "ana", "config", "set", "models.reasoning.model",
                                 "gpt-4o"], env=env)  # a section begun: written, with a note
    assert result.exit_code == 0, result.output
    assert "note: models.reasoning.provider is not set yet" in result.output
    result = runner.invoke(cli, ["--agent", "ana", "config", "check"], env=env)
    assert result.exit_code == 1 and "models.reasoning.provider: required" in result.output
    for key, value in (("models.reasoning", "{provider = 'openai', model = 'gpt-4o'}"),
                       ("agent.language", "es")):
        result = runner.invoke(cli, ["--agent", "ana", "config", "set", key, value], env=env)
        assert result.exit_code == 0, result.output
        assert "note:" not in result.output
    result = runner.invoke(cli, ["--agent", "ana", "config", "show"], env=env)
    assert 'model = "gpt-4o"' in result.output and 'language = "es"' in result.output
    result = runner.invoke(cli, ["--agent", "ana", "config", "check"], env=env)
    assert result.exit_code == 1 and "OPENAI_API_KEY" in result.output
    result = runner.invoke(cli, ["--agent", "ana", "config", "check"],
                           env={**env, "OPENAI_API_KEY": "sk-test"})
    assert result.exit_code == 0 and "valid" in result.output
    assert (tmp_path / "agents" / "ana" / "config.toml").exists()


def test_a_bad_config_file_is_a_message_not_a_traceback(tmp_path):
    (tmp_path / "agents" / "default").mkdir(parents=True)
    (tmp_path / "agents" / "default" / "config.toml").write_text("[cycle]\nmax_step = 3\n")
    done = subprocess.run([*NOEMA, "chat"], capture_output=True, text=True,
                          env=env_for(tmp_path), timeout=60)
    assert done.returncode == 1
    assert "cycle.max_step: unknown setting. Did you mean 'max_steps'?" in done.stderr
    assert "Traceback" not in done.stderr


SCRIPT = """
[[responses]]
text = "Let me check the clock."
[[responses.tool_calls]]
name = "get_current_time"
arguments = { timezone = "UTC" }

[[responses]]
text = "It is daytime somewhere."

[[responses]]
text = "{long}"

[[responses]]
text = "{long}"

[[responses]]
text = "Still here."
"""


def test_chat_streams_stops_and_reports_status(tmp_path):
    config = ("[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
              "script = 'script.toml'\ntoken_delay_s = 0.004\n")
    script = SCRIPT.replace("{long}", "blah " * 3000)
    with chat_with(tmp_path, config, **{"script.toml": script}) as chat:
        chat.expect("you> ")
        chat.sendline("what time is it?")
        chat.expect(r"get_current_time\(\{\"timezone\": \"UTC\"\}\)")
        chat.expect("It is daytime somewhere.")
        chat.expect("you> ")
        chat.sendline("/status")
        chat.expect(r"context: about [\d,]+ of 32,768 tokens")
        chat.sendline("tell me a long story")
        chat.expect("blah blah blah")
        chat.sendline("/stop")
        chat.expect(r"\(stopped\)")
        chat.sendline("and another")
        chat.expect("blah blah blah")
        chat.sendintr()  # Ctrl-C stops the reply, not the program
        chat.expect(r"\(stopped\)")
        chat.sendline("are you there?")
        chat.expect("Still here.")
        chat.sendline("/quit")
        chat.expect(pexpect.EOF)
    assert "Traceback" not in (chat.before or "")


APPROVAL_SCRIPT = """
[[responses]]
[[responses.tool_calls]]
name = "shell_execute"
arguments = { command = "echo approved-run > proof.txt" }

[[responses]]
text = "Done, the file is there."

[[responses]]
[[responses.tool_calls]]
name = "shell_execute"
arguments = { command = "echo unwanted > other.txt" }

[[responses]]
text = "Understood, I left it."
"""


def test_chat_asks_the_person_before_a_command_runs(tmp_path):
    workspace = tmp_path / "ws"
    config = ("[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
              f"script = 'script.toml'\n[[files.roots]]\npath = '{workspace}'\n")
    with chat_with(tmp_path, config, **{"script.toml": APPROVAL_SCRIPT}) as chat:
        chat.expect("you> ")
        chat.sendline("write the proof file")
        chat.expect("shell_execute needs your approval")
        chat.expect(r"allow it\? \[y/N\]")
        chat.sendline("y")
        chat.expect("Done, the file is there.")
        chat.sendline("now the other one")
        chat.expect(r"allow it\? \[y/N\]")
        chat.sendline("n")
        chat.expect("declined")
        chat.expect("Understood, I left it.")
        chat.sendline("/quit")
        chat.expect(pexpect.EOF)
    assert (workspace / "proof.txt").read_text() == "approved-run\n"
    assert not (workspace / "other.txt").exists()

    def noema(*args):
        return subprocess.run([*NOEMA, *args], capture_output=True, text=True,
                              env=env_for(tmp_path), timeout=60)

    history = noema("history")
    assert history.returncode == 0
    assert "agent" in history.stdout and "shell_execute" in history.stdout
    undone = noema("undo")
    assert undone.returncode == 0 and "Undid" in undone.stdout
    assert not (workspace / "proof.txt").exists()


def test_one_agent_is_driven_by_one_process_at_a_time(tmp_path):
    from noema.paths import AgentBusy, AgentLock, AgentPaths

    paths = AgentPaths.for_agent("ana", tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import signal; from noema.paths import AgentLock, AgentPaths;"
         f"l = AgentLock(AgentPaths.for_agent('ana', __import__('pathlib').Path({str(tmp_path)!r})));"
         "print('held', flush=True); signal.pause()"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(AgentBusy, match=rf"already running \(pid {holder.pid}\)"):
            AgentLock(paths)
    finally:
        holder.kill()
        holder.wait()
    AgentLock(paths).release()  # a killed holder leaves no stale lock


def test_chat_with_an_openai_compatible_server_over_real_http(tmp_path):
    from tests.fakes import FakeOpenAIServer, FakeReply, FakeToolCall

    with FakeOpenAIServer(tokens_per_second=200) as server:
        server.script(
            FakeReply(text="Checking. ", tool_calls=(
                FakeToolCall("get_current_time", '{"timezone": "Europe/Madrid"}'),)),
            FakeReply(text="It is a fine hour in Madrid."),
        )
        config = ("[models.reasoning]\nprovider = 'openai-compatible'\nmodel = 'fake-model'\n"
                  f"base_url = '{server.base_url}'\n")
        with chat_with(tmp_path, config) as chat:
            chat.expect("model openai-compatible/fake-model")
            chat.expect("you> ")
            chat.sendline("what time is it in Madrid?")
            chat.expect(r"get_current_time\(")
            chat.expect("It is a fine hour in Madrid.")
            chat.sendline("/quit")
            chat.expect(pexpect.EOF)
        # the provider may ask the server other things first (its tokenizer)
        asked = [r.body for r in server.requests if r.path == "/v1/chat/completions"]
        first, second = asked[0], asked[1]
    assert first["model"] == "fake-model" and first["stream"] is True
    assert any(t["function"]["name"] == "file_write" for t in first["tools"])
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": "what time is it in Madrid?"}
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and "Europe/Madrid" in tool_message["content"]
