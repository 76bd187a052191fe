"""The settings refuse what cannot work, and the token never reaches a log."""

from __future__ import annotations

import logging
from urllib.parse import quote

import pydantic
import pytest

from noema.channels.telegram import TOOL_NAMES
from noema.channels.telegram.settings import TelegramSettings
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer

from .conftest import PERSON, Rig


def test_the_token_is_not_a_setting_and_bad_values_are_named():
    with pytest.raises(pydantic.ValidationError, match="token"):
        TelegramSettings.model_validate({"chat_ids": [1], "token": "123:abc"})
    with pytest.raises(pydantic.ValidationError, match="max_hold_s must be at least"):
        TelegramSettings(chat_ids=(1,), quiet_window_s=5, max_hold_s=2)
    with pytest.raises(pydantic.ValidationError, match="base_url"):
        TelegramSettings(chat_ids=(1,), base_url="api.telegram.org")
    assert not TelegramSettings().configured and TelegramSettings(chat_ids=(1,)).configured


async def test_the_tools_named_for_the_configuration_are_the_ones_offered(rig: Rig):
    channel = await rig.open()
    assert tuple(t.name for t in channel.tools()) == TOOL_NAMES


async def test_the_token_never_reaches_the_log(rig: Rig, server: FakeTelegramServer,
                                               caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG)  # httpx logs every address it calls, token included
    channel = await rig.open()
    server.inject_text(PERSON, "hi")
    await rig.desk.wait(lambda: rig.desk.turns)
    from noema.channels.telegram.channel import TelegramChannel
    from noema.memory.turns import ROLE_OF_KIND, Turn, TurnKind

    assert isinstance(channel, TelegramChannel)
    answer = Turn(2, 0.0, TurnKind.ASSISTANT, ROLE_OF_KIND[TurnKind.ASSISTANT], "hello")
    await channel.reply(rig.desk.turns[0], answer)
    ours = "\n".join(r.getMessage() for r in caplog.records
                     if not r.name.startswith("uvicorn"))  # the fake server's own log aside
    assert "getUpdates" in ours and "sendMessage" in ours  # the addresses are logged…
    assert "<telegram token>" in ours  # …with the token replaced
    assert TOKEN not in ours and quote(TOKEN) not in ours
