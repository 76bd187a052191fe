"""A Telegram message, through the whole agent, to an answer in the chat."""

from __future__ import annotations

import os

from noema.app import build_app
from noema.channels.telegram.settings import TelegramSettings
from noema.config import Config
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, say
from noema.security.settings import FilesSettings, RootSettings
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer

from .conftest import PERSON


def request_answer_id(app) -> int:
    """The ID of the stored answer (the one assistant turn)."""
    from noema.memory.turns import TurnKind

    turns = app.store.range(1, app.store.last_id())
    [answer] = [t for t in turns if t.kind is TurnKind.ASSISTANT]
    return answer.id


def telegram_agent(tmp_path, server: FakeTelegramServer) -> tuple[AgentPaths, Config]:
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    paths.root.mkdir(parents=True)
    paths.secrets_file.write_text(f'TELEGRAM_BOT_TOKEN = "{TOKEN}"\n')
    os.chmod(paths.secrets_file, 0o600)
    config = Config(
        files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
        telegram=TelegramSettings(chat_ids=(PERSON,), base_url=server.base_url,
                                  quiet_window_s=0.2, poll_timeout_s=2),
    )
    return paths, config


async def test_a_telegram_message_starts_a_cycle_whose_answer_reaches_the_chat(
        tmp_path, server: FakeTelegramServer):
    paths, config = telegram_agent(tmp_path, server)
    model = ScriptedProvider([say("The tide is high at 14:05 (in Vigo). Take a coat!")])
    app = build_app(paths, config, provider=model)
    try:
        await app.start()
        assert "telegram_send" in app.tools and "telegram_save_file" in app.tools
        server.inject_text(PERSON, "When is high tide?")
        [sent] = await server.wait_sent_async(1)
        assert sent.chat_id == PERSON and server.refused == []
        assert sent.plain == "The tide is high at 14:05 (in Vigo). Take a coat!"
        [request] = model.requests
        assert request.messages[-1].content.endswith("When is high tide?")
        [view] = [c.view() for c in app.channels]
        assert view.name == "telegram" and view.state == "connected"
    finally:
        await app.aclose()
    # A restart offers the answer again; it is not sent twice.
    app = build_app(paths, config, provider=ScriptedProvider([]))
    try:
        await app.start()  # offers every recent (question, answer) pair again
        assert app.replies is not None
        await app.replies.aclose()  # waits for the offered answers to be handled
        assert len(server.sent) == 1
        [channel] = app.channels
        assert channel.state.outbox(request_answer_id(app)).done
    finally:
        await app.aclose()


async def test_a_crash_between_submit_and_the_channels_record_takes_the_message_once(
        tmp_path, server: FakeTelegramServer):
    from noema.channels.telegram.state import TelegramState
    from noema.memory.store import TurnStore
    from noema.memory.turns import NewTurn, TurnKind

    paths, config = telegram_agent(tmp_path, server)
    build_app(paths, config, provider=ScriptedProvider([])).close()  # the agent's files
    # What a kill -9 leaves: the batch written, the agent's turn stored, no record of it.
    state = TelegramState(paths.root / "telegram.db")
    state.open_batch(PERSON, "book the ferry")
    state.open_batch(PERSON, "and a cabin")  # this one never reached the agent
    state.close()
    store = TurnStore(paths.turns_db)
    store.append(NewTurn(TurnKind.USER, "book the ferry", channel="telegram", sender=str(PERSON)))
    store.close()
    app = build_app(paths, config, provider=ScriptedProvider([say("Booked.")]))
    try:
        await app.start()
        await app.agent.idle()
        turns = app.store.range(1, app.store.last_id())
        asked = [t.content for t in turns if t.kind is TurnKind.USER]
        assert asked == ["book the ferry", "and a cabin"]
    finally:
        await app.aclose()
