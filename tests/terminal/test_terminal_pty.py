"""`noema chat` at a real terminal (a pty, TERM=xterm): the prompt_toolkit
prompt, Markdown answers, multi-line input, an approval, Ctrl-C, the history."""

from __future__ import annotations

import io
import re
import stat
from pathlib import Path

import pexpect
import pytest

from noema.memory.store import TurnStore
from noema.memory.turns import TurnKind
from tests.foundation.test_cli import NOEMA, env_for

pytestmark = pytest.mark.slow

SCRIPT = """
[[responses]]
text = "Let me check."
[[responses.tool_calls]]
name = "get_current_time"
arguments = { timezone = "UTC" }

[[responses]]
text = "It is **daytime** somewhere."

[[responses]]
text = "Two lines received."

[[responses]]
[[responses.tool_calls]]
name = "shell_execute"
arguments = { command = "echo approved-run > proof.txt" }

[[responses]]
text = "Done, the file is there."

[[responses]]
text = "{long}"

[[responses]]
text = "Still here."
"""

ESC = "\x1b"
ALT_ENTER = ESC + "\r"


def test_the_chat_at_a_real_terminal(tmp_path: Path):
    agent = tmp_path / "agents" / "default"
    agent.mkdir(parents=True)
    workspace = tmp_path / "ws"
    (agent / "script.toml").write_text(SCRIPT.replace("{long}", "blah " * 3000))
    (agent / "config.toml").write_text(
        "[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
        "script = 'script.toml'\ntoken_delay_s = 0.004\n"
        f"[[files.roots]]\npath = '{workspace}'\n")
    # The pty answers no cursor-position request; tell prompt_toolkit not to ask.
    env = {**env_for(tmp_path), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    chat = pexpect.spawn(NOEMA[0], [*NOEMA[1:], "chat"], env=env, encoding="utf-8",
                         timeout=30, dimensions=(30, 100))
    try:
        chat.expect("running the agent here")
        chat.expect("you>")
        chat.send("what time is it?\r")
        chat.expect(re.escape('get_current_time({"timezone": "UTC"})'))
        # Rendered as Markdown: bold, not asterisks.
        chat.expect(re.escape(f"It is {ESC}[1mdaytime{ESC}[0m somewhere."))

        chat.send("line one" + ALT_ENTER + "line two\r")
        chat.expect("Two lines received.")

        chat.send("write the proof file\r")
        chat.expect("shell_execute needs your approval")
        chat.expect(re.escape("allow shell_execute? [y/N]"))
        chat.send("y\r")
        chat.expect("Done, the file is there.")

        chat.send("/status\r")
        chat.expect(r"context: about [\d,]+ of 32,768 tokens")

        chat.send("tell me a long story\r")
        chat.expect("blah")
        chat.sendcontrol("c")  # a key at the prompt: stops the reply, not the chat
        chat.expect(re.escape("(stopped)"))
        chat.send("are you there?\r")
        chat.expect("Still here.")
        chat.send("/quit\r")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    assert "Traceback" not in (chat.before or "")
    assert (workspace / "proof.txt").read_text() == "approved-run\n"

    store = TurnStore(agent / "turns.db")
    try:
        said = [t.content for t in store.range(1, 10_000) if t.kind is TurnKind.USER]
    finally:
        store.close()
    assert "line one\nline two" in said and "y" not in said  # the answer is no message

    history = agent / "chat_history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert "+line one\n+line two" in history.read_text()


ASKING_SCRIPT = """
[[responses]]
[[responses.tool_calls]]
name = "shell_execute"
arguments = { command = "echo ran > proof.txt" }

[[responses]]
text = "Understood, not run."

[[responses]]
text = "I read your yes."
"""


def test_a_yes_typed_before_the_question_is_a_message_and_only_an_answer_at_its_prompt_counts(
        tmp_path: Path):
    agent = tmp_path / "agents" / "default"
    agent.mkdir(parents=True)
    workspace = tmp_path / "ws"
    (agent / "script.toml").write_text(ASKING_SCRIPT)
    (agent / "config.toml").write_text(
        "[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
        "script = 'script.toml'\ntoken_delay_s = 0.004\n"
        f"[[files.roots]]\npath = '{workspace}'\n")
    # No PROMPT_TOOLKIT_NO_CPR: the chat asks the terminal nothing, so no reply
    # of the terminal's can be taken for typing.
    env = {**env_for(tmp_path), "TERM": "xterm"}
    chat = pexpect.spawn(NOEMA[0], [*NOEMA[1:], "chat"], env=env, encoding="utf-8",
                         timeout=30, dimensions=(30, 100))
    seen = io.StringIO()
    chat.logfile_read = seen
    try:
        chat.expect("you>")
        # Both lines typed at once, before any question exists.
        chat.send("write the proof file\ryes\r")
        chat.expect("shell_execute needs your approval")
        chat.expect(re.escape("allow shell_execute? [y/N]"))
        chat.send("n\r")  # at the question's own prompt: the answer
        chat.expect("Understood, not run.")
        chat.expect("I read your yes.")
        chat.send("/quit\r")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    assert "Traceback" not in (chat.before or "")
    assert not (workspace / "proof.txt").exists()
    assert "\x1b[6n" not in seen.getvalue()  # no cursor-position request was sent

    store = TurnStore(agent / "turns.db")
    try:
        said = [t.content for t in store.range(1, 10_000) if t.kind is TurnKind.USER]
    finally:
        store.close()
    assert said == ["write the proof file", "yes"]  # "yes" stored once, "n" never
