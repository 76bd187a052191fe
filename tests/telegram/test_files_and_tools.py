"""Attachments are listed in the person's message and saved as versioned
writes; telegram_send asks before writing to a chat the person never used."""

from __future__ import annotations

import pytest

from noema.channels.telegram.channel import TelegramChannel
from noema.security.approvals import ApprovalRequest
from noema.tools.registry import Tool, ToolContext, ToolError
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import PERSON, Rig

PDF = b"%PDF-1.4 a small report\n" * 40


def ctx() -> ToolContext:
    return ToolContext(call_id="call_1", turn_id=17, cycle_id=3)


def tool(channel: TelegramChannel, name: str, gate) -> Tool:
    [found] = [t for t in channel.tools() if t.name == name]
    return gate.wrap(found)  # as the composition root offers it


async def test_attachments_are_listed_and_saved_as_a_versioned_write(
        rig: Rig, server: FakeTelegramServer):
    channel = await rig.open()
    server.inject_document(PERSON, "report.pdf", "application/pdf", PDF, caption="the report")
    server.inject_photo(PERSON, b"\xff\xd8photo-bytes" * 100)
    await rig.desk.wait(lambda: rig.desk.turns)
    [turn] = rig.desk.turns
    lines = turn.content.split("\n")
    assert lines[0] == "the report"
    assert lines[1].startswith("[attached document 'report.pdf' (application/pdf, 960 bytes), "
                               "file_id F")
    assert lines[2].startswith("[attached photo 'photo_")
    assert "(image/jpeg, 1.3 KB)" in lines[2]  # the largest size of the photo
    file_id = lines[1].split("file_id ")[1].split(":")[0]

    save = tool(channel, "telegram_save_file", rig.hands.gate)
    result = await save.handler(ctx(), file_id=file_id, path="inbox/report.pdf")
    assert result.startswith(f"Saved {len(PDF)} bytes to inbox/report.pdf (version ")
    root = rig.hands.policy.writable_roots[0]
    assert (root.path / "inbox" / "report.pdf").read_bytes() == PDF
    [version, *_] = rig.hands.versions.store_for(root).log("inbox/report.pdf")
    assert version.note.tool == "telegram_save_file" and version.note.turn_id == 17


async def test_saving_refuses_a_denied_path_and_an_unknown_file(rig: Rig):
    channel = await rig.open()
    save = tool(channel, "telegram_save_file", rig.hands.gate)
    with pytest.raises(Exception, match="outside|not allowed|denied|refused"):
        await save.handler(ctx(), file_id="F0001x", path="/etc/passwd")
    with pytest.raises(ToolError, match="Telegram has no file 'nope'"):
        await save.handler(ctx(), file_id="nope", path="x.bin")


async def test_sending_to_the_person_needs_no_question(rig: Rig, server: FakeTelegramServer):
    channel = await rig.open()
    server.inject_text(PERSON, "hi")
    await rig.desk.wait(lambda: rig.desk.turns)
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    rig.hands.gate.attach(approver)
    send = tool(channel, "telegram_send", rig.hands.gate)
    assert await send.handler(ctx(), text="Your alarm: **stretch**.") == \
        f"Sent to Telegram chat {PERSON} (1 message)."
    assert asked == [] and server.sent[-1].plain == "Your alarm: stretch."


@pytest.mark.parametrize("approve", [True, False])
async def test_a_chat_the_person_never_used_is_asked_even_when_allowed(
        rig: Rig, server: FakeTelegramServer, approve: bool):
    channel = await rig.open()
    server.inject_text(555, "a stranger who wrote once")
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return approve

    rig.hands.gate.attach(approver)
    assert rig.hands.gate.level(channel.tools()[0]) == "allow"
    send = tool(channel, "telegram_send", rig.hands.gate)
    if approve:
        await send.handler(ctx(), text="the notes", chat_id=555)
        assert [m.chat_id for m in server.sent] == [555]
    else:
        with pytest.raises(ToolError, match="declined"):
            await send.handler(ctx(), text="the notes", chat_id=555)
        assert server.sent == []
    [request] = asked
    assert request.tool == "telegram_send" and "not one of yours" in request.reason


async def test_with_nobody_to_ask_a_new_chat_is_refused(rig: Rig, server: FakeTelegramServer):
    channel = await rig.open()
    server.inject_text(555, "hello")
    send = tool(channel, "telegram_send", rig.hands.gate)
    with pytest.raises(ToolError, match="approval"):
        await send.handler(ctx(), text="the notes", chat_id=555)
    assert server.sent == []
