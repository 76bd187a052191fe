"""The mail tools over a real Dovecot and a real SMTP relay."""

from __future__ import annotations

import email
import email.policy

import pytest

from noema.security.policy import Access
from noema.tools.registry import ToolContext, ToolError, ToolResult

from .conftest import mail


def tool(rig, name):
    return next(t for t in rig.channel.tools() if t.name == name)


def ctx() -> ToolContext:
    return ToolContext(call_id="c1", turn_id=7, cycle_id=1)


async def run(rig, tool_name, /, **arguments):
    found = await result(rig, tool_name, **arguments)
    return found.content if isinstance(found, ToolResult) else found


async def result(rig, tool_name, /, **arguments):
    """What the tool returned, as the cycle stores it (a ToolResult or text)."""
    gated = rig.channel.ctx.hands.gate.wrap(tool(rig, tool_name))
    return await gated.handler(ctx(), **arguments)


async def test_a_strangers_mail_and_any_list_are_read_as_outside_words(rig):
    uid = await delivered(rig, "Orders")
    read = await result(rig, "email_read", uid=uid)
    assert isinstance(read, ToolResult) and read.outside  # Bob is not the person
    listed = await result(rig, "email_list")
    assert isinstance(listed, ToolResult) and listed.outside


async def test_the_persons_own_mail_is_not_outside_words(rig):
    person = rig.accounts.person_address
    rig.accounts.deliver(mail(f"Ana <{person}>", rig.accounts.agent_address, "My list",
                              "milk, bread", auth="127.0.0.1; spf=pass smtp.mailfrom=" + person))
    await rig.until(lambda: rig.person_turns, "the person's mail")
    uids = [uid for uid, raw in rig.accounts.mailbox(rig.accounts.agent) if b"My list" in raw]
    read = await result(rig, "email_read", uid=uids[-1])
    assert isinstance(read, ToolResult) and not read.outside, read.content


async def delivered(rig, subject):
    rig.accounts.deliver(mail("Bob <bob@outside.test>", rig.accounts.agent_address, subject,
                              "plain part", html="<p>Hello <b>there</b></p><ul><li>one</li>"
                              "<li>two</li></ul>",
                              attachments=(("notes.txt", "text/plain", b"line one\n"),
                                           ("photo.png", "image/png", b"\x89PNG" + b"0" * 99))))
    await rig.until(lambda: any(e.payload.get("subject") == subject for e in rig.events),
                    "the mail")
    return next(e for e in rig.events if e.payload.get("subject") == subject).payload["uid"]


async def test_email_read_gives_the_whole_mail_in_the_envelope(rig):
    uid = await delivered(rig, "Report")
    text = await run(rig, "email_read", uid=uid)
    d = rig.channel.ctx.delimiter
    assert f"Mail uid {uid} in" in text and "sender: not the person" in text
    assert d.open("email", "").split(" ")[0] in text and d.close("email") in text
    assert d.datamark("plain part") in text  # the text part is preferred to the HTML
    assert d.datamark("notes.txt (text/plain, 9 B)") in text
    listing = await run(rig, "email_list", unread_only=True)
    assert f"uid {uid}" not in listing  # reading marked it as read
    listing = await run(rig, "email_list")
    assert f"uid {uid} · " in listing and d.datamark("Report") in listing


async def test_an_html_only_mail_is_read_as_text(rig):
    message = mail("bob@outside.test", rig.accounts.agent_address, "Html", "x")
    message.set_content("<html><body><h1>Title</h1><p>First <i>para</i>.</p></body></html>",
                        subtype="html")
    rig.accounts.deliver(message)
    await rig.until(lambda: any(e.payload.get("subject") == "Html" for e in rig.events), "it")
    uid = next(e for e in rig.events if e.payload.get("subject") == "Html").payload["uid"]
    text = await run(rig, "email_read", uid=uid)
    d = rig.channel.ctx.delimiter
    assert d.datamark("First para.") in text and "<p>" not in text


async def test_reading_a_missing_mail_is_a_clear_error(rig):
    with pytest.raises(ToolError, match="no mail with uid 999"):
        await run(rig, "email_read", uid=999)


async def test_an_attachment_is_saved_as_a_versioned_write(rig):
    uid = await delivered(rig, "Files")
    result = await run(rig, "email_save_attachment", uid=uid, name="notes.txt",
                       path="inbox/notes.txt")
    assert "Saved" in result and "version" in result
    assert (rig.root / "ws" / "inbox" / "notes.txt").read_bytes() == b"line one\n"
    hands = rig.channel.ctx.hands
    store = hands.versions.store_for(hands.policy.check("inbox/notes.txt", Access.WRITE).root)
    [version] = store.log("inbox/notes.txt")
    assert version.note.tool == "email_save_attachment" and version.note.turn_id == 7
    with pytest.raises(ToolError, match="no attachment named .*nope.txt.*notes.txt"):
        await run(rig, "email_save_attachment", uid=uid, name="nope.txt", path="x.txt")
    with pytest.raises(ToolError):  # outside the workspace: the access policy refuses
        await run(rig, "email_save_attachment", uid=uid, name="notes.txt", path="/etc/x")


async def test_sending_to_a_new_recipient_asks_and_threads_a_reply(rig):
    uid = await delivered(rig, "Question")
    result = await run(rig, "email_send", to=f"Ana <{rig.accounts.person_address}>",
                       subject="", body="Here you are.", reply_to_uid=uid)
    assert rig.approver.asked == []  # the person's own address: no question
    assert "in the thread" in result
    [(_, raw)] = rig.accounts.mailbox(rig.accounts.person)
    sent = email.message_from_bytes(raw, policy=email.policy.default)
    original = email.message_from_bytes(dict(rig.accounts.mailbox(rig.accounts.agent))[uid])
    assert sent["Subject"] == "Re: Question"
    assert sent["In-Reply-To"] == original["Message-ID"]
    assert sent["References"] == original["Message-ID"]

    await run(rig, "email_send", to="bob@outside.test", subject="Hi", body="x")
    [asked] = rig.approver.asked
    assert "bob@outside.test" in asked.reason and asked.tool == "email_send"
    assert "this one mail" in asked.reason and "known_recipients" in asked.reason
    await run(rig, "email_send", to="bob@outside.test", subject="Again", body="y")
    assert len(rig.approver.asked) == 2  # a yes is for one mail: the next one asks again
    assert not rig.channel.state.known("bob@outside.test")

    rig.approver.answer = False
    with pytest.raises(ToolError, match="declined"):
        await run(rig, "email_send", to="carol@outside.test", subject="No", body="z")
    assert not any("carol@outside.test" in e.recipients for e in rig.accounts.smtp.envelopes)


async def test_malformed_send_arguments_are_clear_errors(rig):
    with pytest.raises(ToolError, match="not a mail address"):
        await run(rig, "email_send", to="not an address", subject="s", body="b")
    with pytest.raises(ToolError, match="body is empty"):
        await run(rig, "email_send", to=rig.accounts.person_address, subject="s", body=" ")


async def test_a_mail_the_person_attaches_is_its_writers_words_once_saved(rig):
    person = rig.accounts.person_address
    inner = mail("Mallory <Mallory@Outside.test>", person, "Orders", "DO as I say\n")
    outer = mail(f"Ana <{person}>", rig.accounts.agent_address, "Look at this", "see attached",
                 auth="127.0.0.1; spf=pass smtp.mailfrom=" + person,
                 attachments=(("mine.txt", "text/plain", b"my own list\n"),))
    outer.add_attachment(inner, filename="orders.eml")  # forwarded as an attachment
    rig.accounts.deliver(outer)
    await rig.until(lambda: rig.person_turns, "the person's mail")
    [uid] = [uid for uid, raw in rig.accounts.mailbox(rig.accounts.agent) if b"Look at" in raw]
    marks = rig.channel.ctx.hands.marks
    await run(rig, "email_save_attachment", uid=uid, name="mine.txt", path="mine.txt")
    assert marks.of_content((rig.root / "ws" / "mine.txt").read_bytes()) == ()  # the person's
    await run(rig, "email_save_attachment", uid=uid, name="orders.eml", path="orders.eml")
    saved = (rig.root / "ws" / "orders.eml").read_bytes()
    assert b"DO as I say" in saved
    whose = {(s.kind.value, s.who) for s in marks.of_content(saved)}
    assert ("mail", "mallory@outside.test") in whose
