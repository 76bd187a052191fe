"""A restart or a kill -9 at any point neither loses nor doubles a message.

Each crash point is rebuilt exactly as a killed process leaves it (the state
file's rows and the conversation's turns), then a new channel starts over it.
"""

from __future__ import annotations

from noema.channels.telegram.incoming import Incoming
from noema.channels.telegram.state import TelegramState
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import PERSON, Rig


async def test_a_restart_resumes_from_the_offset(rig: Rig, server: FakeTelegramServer):
    await rig.open()
    server.inject_text(PERSON, "one")
    await rig.desk.wait(lambda: len(rig.desk.turns) == 1)
    await rig.close()
    server.inject_text(PERSON, "two")  # while the agent is down
    await rig.open()
    await rig.desk.wait(lambda: len(rig.desk.turns) == 2)
    server.inject_text(PERSON, "three")
    await rig.desk.wait(lambda: len(rig.desk.turns) == 3)
    assert [t.content for t in rig.desk.turns] == ["one", "two", "three"]


async def test_messages_taken_but_not_yet_submitted_are_submitted_after_a_crash(
        rig: Rig, server: FakeTelegramServer):
    # Killed inside the quiet window: Telegram has forgotten the updates (a later
    # offset was asked for), only the state file holds them.
    state = TelegramState(rig.root / "telegram.db")
    state.take(41, [Incoming(40, PERSON, 0.0, "first half"),
                    Incoming(41, PERSON, 0.0, "second half")], [])
    state.close()
    await rig.open()
    await rig.desk.wait(lambda: rig.desk.turns)
    assert [t.content for t in rig.desk.turns] == ["first half\nsecond half"]
    assert rig.channel is not None and rig.channel.state.pending() == {}


async def test_a_batch_the_agent_never_got_is_submitted_on_start(rig: Rig):
    # Killed after the batch was written, before `submit` stored it.
    state = TelegramState(rig.root / "telegram.db")
    state.take(50, [Incoming(50, PERSON, 0.0, "are you there?")], [])
    state.open_batch(PERSON, "are you there?")
    state.close()
    await rig.open()
    assert [t.content for t in rig.desk.turns] == ["are you there?"]
    assert rig.channel is not None and rig.channel.state.unsettled() == []


async def test_a_batch_the_agent_took_is_not_submitted_again(rig: Rig):
    # The person said the same thing twice; the second was stored by `submit`,
    # then the process died before the channel recorded its turn.
    state = TelegramState(rig.root / "telegram.db")
    first = state.open_batch(PERSON, "ok")
    state.settle(first, rig.desk.submit("ok", channel="telegram", sender=str(PERSON)).id)
    state.open_batch(PERSON, "ok")
    rig.desk.submit("ok", channel="telegram", sender=str(PERSON))
    state.close()
    await rig.open()
    assert [t.content for t in rig.desk.turns] == ["ok", "ok"]
    assert rig.channel is not None and rig.channel.state.unsettled() == []
    assert rig.channel.state.last_turn() == 2


async def test_a_refused_submission_waits_and_is_taken_once_there_is_room(
        rig: Rig, server: FakeTelegramServer):
    rig.desk.refuse = 2  # the disk is full for the next two attempts
    await rig.open()
    server.inject_text(PERSON, "first")
    await rig.desk.wait(lambda: rig.desk.turns)
    server.inject_text(PERSON, "second")
    await rig.desk.wait(lambda: len(rig.desk.turns) == 2)
    assert [t.content for t in rig.desk.turns] == ["first", "second"]
    assert len(rig.notices) == 1 and "could not be taken" in rig.notices[0]


async def test_a_damaged_state_file_is_moved_aside_and_telegram_keeps_working(
        rig: Rig, server: FakeTelegramServer):
    from noema.memory.turns import ROLE_OF_KIND, Turn, TurnKind

    old = []
    for n in range(2):  # a question, then the slot its answer took in the conversation
        old.append(rig.desk.submit(f"old {n}", channel="telegram", sender=str(PERSON)))
        rig.desk.submit("(the answer's place)", channel="terminal")
    # The person's chat wrote to the bot before (the old questions came from it), so
    # the Bot API knows it; those updates were confirmed long ago and are gone.
    server.inject_text(PERSON, "hello")
    server.reset()
    damaged = b"this is not a database " * 200
    (rig.root / "telegram.db").write_bytes(damaged)
    channel = await rig.open()
    # The router offers recent answers again: only the newest question's may go.
    for question, answer_id in ((old[0], old[0].id + 1), (old[1], old[1].id + 1)):
        answer = Turn(answer_id, 0.0, TurnKind.ASSISTANT, ROLE_OF_KIND[TurnKind.ASSISTANT],
                      f"answer to {question.content}")
        await channel.reply(question, answer)
    assert [m.plain for m in server.sent] == ["answer to old 1"]
    [notice] = rig.notices
    assert "Telegram state file was damaged" in notice and "moved to" in notice
    [aside] = rig.root.glob("telegram.db.damaged-*")
    assert aside.read_bytes() == damaged  # kept, not deleted
    server.inject_text(PERSON, "still works")
    await rig.desk.wait(lambda: rig.desk.turns[-1].content == "still works")
