"""What a person notices at the terminal: one prompt after a stop, a word while a
retry waits (and a stop that still works then), a damaged identity that breaks
nothing. The real `noema chat` in a pty, against the fake model servers."""

from __future__ import annotations

import re

import pexpect
import pytest

from tests.fakes import FakeFailure, FakeOpenAIServer, FakeReply

from .test_cli import chat_with

pytestmark = pytest.mark.slow

SCRIPTED = ("[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
            "script = 'script.toml'\ntoken_delay_s = 0.004\n")
LONG = '[[responses]]\ntext = "{long}"\n\n[[responses]]\ntext = "{long}"\n\n' \
       '[[responses]]\ntext = "Still here."\n'


def openai_config(server: FakeOpenAIServer) -> str:
    return ("[models.reasoning]\nprovider = 'openai-compatible'\nmodel = 'fake-model'\n"
            f"base_url = '{server.base_url}'\n")


def prompts_shown_next(chat: pexpect.spawn) -> int:
    """After a stop: send /help, and count the prompts shown before its answer."""
    chat.sendline("/help")
    chat.expect("Commands:")
    return (chat.before or "").count("you> ")


def test_the_prompt_comes_back_once_after_a_stop(tmp_path):
    script = LONG.replace("{long}", "blah " * 3000)
    with chat_with(tmp_path, SCRIPTED, **{"script.toml": script}) as chat:
        chat.expect("you> ")
        chat.sendline("tell me a long story")
        chat.expect("blah blah blah")
        chat.sendline("/stop")
        chat.expect(r"\(stopped\)")
        assert prompts_shown_next(chat) == 1
        chat.sendline("another one")
        chat.expect("blah blah blah")
        chat.sendintr()  # Ctrl-C
        chat.expect(r"\(stopped\)")
        assert prompts_shown_next(chat) == 1
        chat.sendline("are you there?")
        chat.expect("Still here.")
        chat.sendline("/quit")
        chat.expect(pexpect.EOF)
    assert "Traceback" not in (chat.before or "")


def test_a_wait_the_provider_asked_for_is_shown_and_a_stop_still_works(tmp_path):
    with FakeOpenAIServer() as server:
        # The longest wait we honour (60 s) is far past the pty's patience: a stop
        # that did not cut the wait short would fail the test.
        server.script(FakeFailure(429, "slow down", retry_after=1),
                      FakeFailure(429, "slow down", retry_after=60),
                      FakeReply(text="After the stop."))
        with chat_with(tmp_path, openai_config(server)) as chat:
            chat.expect("you> ")
            chat.sendline("hello")
            chat.expect(re.escape("* the provider asked to wait 1 s; retry 1 of 4"))
            chat.expect(re.escape("* the provider asked to wait 60 s; retry 2 of 4"))
            chat.sendline("/stop")
            chat.expect(r"\(stopped\)", timeout=20)
            chat.expect("you> ")
            chat.sendline("and now?")
            chat.expect("After the stop.")
            chat.sendline("/quit")
            chat.expect(pexpect.EOF)
        assert len(server.requests) == 3  # the stopped request was never retried


def test_our_own_backoff_is_shown_and_ctrl_c_stops_it(tmp_path):
    with FakeOpenAIServer() as server:
        server.script(FakeFailure(503, "upstream down"), FakeFailure(429, retry_after=60))
        with chat_with(tmp_path, openai_config(server)) as chat:
            chat.expect("you> ")
            chat.sendline("hello")
            chat.expect(r"\* server error \(HTTP 503: upstream down\); waiting [\d.]+ s "
                        r"before retry 1 of 4")
            chat.expect(re.escape("retry 2 of 4"))
            chat.sendintr()
            chat.expect(r"\(stopped\)", timeout=20)
            chat.expect("you> ")
            chat.sendline("/quit")
            chat.expect(pexpect.EOF)
    assert "Traceback" not in (chat.before or "")


def test_a_non_utf8_identity_breaks_neither_status_nor_the_answer(tmp_path):
    identity = tmp_path / "agents" / "default" / "identity"
    identity.mkdir(parents=True)
    (identity / "identity.md").write_bytes(b"# Who you are\n\nYou are \xff\xfe Ana.\n")
    script = '[[responses]]\ntext = "Hello, I am here."\n'
    with chat_with(tmp_path, SCRIPTED, **{"script.toml": script}) as chat:
        chat.expect("you> ")
        chat.sendline("/status")
        chat.expect(r"context: about [\d,]+ of [\d,]+ tokens")
        chat.sendline("hello")
        chat.expect("Hello, I am here.")
        chat.sendline("/status")
        chat.expect(r"context: about [\d,]+ of [\d,]+ tokens")
        chat.sendline("/quit")
        chat.expect(pexpect.EOF)
        seen = chat.before or ""
    assert "Traceback" not in seen
    log = (tmp_path / "agents" / "default" / "logs" / "noema.log").read_text()
    assert "is not valid UTF-8" in log
