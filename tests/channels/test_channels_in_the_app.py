"""Channels in the composition root: their tools are known to the autonomy
check, and they carry the person's messages even with the senses off."""

from __future__ import annotations

import os

import pytest

from noema.app import build_app, offered_tool_names
from noema.config import ConfigError, validate
from noema.memory.turns import TurnKind
from noema.orchestrator.agent import AgentListener
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, say
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer
from tests.foundation.damage import overwrite_header

PERSON = 4242
MAIL = {"imap_host": "127.0.0.1", "imap_port": 1, "username": "ana",
        "allow_from": ["person@example.org"]}


@pytest.fixture
def server(telegram_server: FakeTelegramServer) -> FakeTelegramServer:
    telegram_server.reset()
    return telegram_server


def paths_in(tmp_path) -> AgentPaths:
    return AgentPaths.for_agent("ana", tmp_path / "home")


# -- the tools offered ------------------------------------------------------------------


def test_without_channels_no_channel_tool_is_offered(tmp_path):
    names = offered_tool_names(validate({}, "t"), paths_in(tmp_path))
    assert not [n for n in names if n.startswith(("email_", "telegram_"))]


def test_a_configured_mail_account_offers_the_mail_tools(tmp_path):
    names = offered_tool_names(validate({"mail": MAIL}, "t"), paths_in(tmp_path))
    assert {"email_list", "email_read", "email_send", "email_save_attachment"} <= set(names)
    assert not [n for n in names if n.startswith("telegram_")]


def test_a_configured_telegram_chat_offers_the_telegram_tools(tmp_path):
    names = offered_tool_names(validate({"telegram": {"chat_ids": [PERSON]}}, "t"),
                               paths_in(tmp_path))
    assert {"telegram_send", "telegram_save_file"} <= set(names)
    assert not [n for n in names if n.startswith("email_")]


def test_autonomy_may_name_a_channel_tool_only_when_the_channel_is_configured(tmp_path):
    levels = {"autonomy": {"tools": {"email_send": "ask", "telegram_send": "deny"}}}
    config = validate({**levels, "mail": MAIL, "telegram": {"chat_ids": [PERSON]}}, "t")
    app = build_app(paths_in(tmp_path), config, provider=ScriptedProvider([]))
    try:
        # What the check offers is what the agent is given.
        assert sorted(app.tools.names()) == sorted(offered_tool_names(config, paths_in(tmp_path)))
        assert app.hands.gate.level(app.tools.get("telegram_send")) == "deny"
    finally:
        app.close()
    with pytest.raises(ConfigError, match="email_send"):
        build_app(paths_in(tmp_path), validate(levels, "t"), provider=ScriptedProvider([]))


# -- senses off ------------------------------------------------------------------------------


class Notices(AgentListener):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def on_notice(self, text: str) -> None:
        self.notices.append(text)


async def test_with_the_senses_off_the_person_still_reaches_the_agent_by_telegram(
        tmp_path, server: FakeTelegramServer):
    paths = paths_in(tmp_path)
    paths.root.mkdir(parents=True)
    paths.secrets_file.write_text(f'TELEGRAM_BOT_TOKEN = "{TOKEN}"\n')
    os.chmod(paths.secrets_file, 0o600)
    config = validate({"telegram": {"chat_ids": [PERSON], "base_url": server.base_url,
                                    "quiet_window_s": 0.2, "poll_timeout_s": 2}}, "t")
    build_app(paths, config, provider=ScriptedProvider([])).close()  # the agent's files
    overwrite_header(paths.archive_db)  # the sensory archive is damaged: senses off

    heard = Notices()
    model = ScriptedProvider([say("Yes, I am here.")])
    app = build_app(paths, config, provider=model, listener=heard)
    try:
        assert any(n.startswith("senses are off") for n in heard.notices)
        assert "telegram" in app.hub.sensors
        await app.start()
        server.inject_text(PERSON, "are you there?")
        [sent] = await server.wait_sent_async(1)
        assert sent.chat_id == PERSON and sent.plain == "Yes, I am here."
        asked = [t for t in app.session.turns if t.kind is TurnKind.USER]
        assert [(t.content, t.channel) for t in asked] == [("are you there?", "telegram")]
    finally:
        await app.aclose()
