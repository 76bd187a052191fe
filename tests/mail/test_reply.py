"""Answers to the person's mail go back in the thread, once; intake survives a crash."""

from __future__ import annotations

import email
import email.policy
import imaplib

from noema.channels.mail.intake import header_line
from noema.channels.mail.message import read_mail
from noema.channels.mail.state import MailState
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, Turn, TurnKind

from .conftest import make_rig, mail
from .servers import PASSWORD


def answer_turn(rig, text: str) -> Turn:
    return rig.store.append(NewTurn(TurnKind.ASSISTANT, text))


async def persons_mail(rig, subject: str, **headers) -> Turn:
    accounts = rig.accounts
    accounts.deliver(mail(f"Ana <{accounts.person_address}>", accounts.agent_address, subject,
                          "What do you think?", **headers))
    await rig.until(lambda: any(subject in t.content for t in rig.person_turns()), subject)
    return next(t for t in rig.person_turns() if subject in t.content)


async def test_the_answer_goes_back_in_the_thread_once(rig):
    accounts = rig.accounts
    question = await persons_mail(rig, "Re: Budget", references="<root@mail.test>")
    answer = answer_turn(rig, "I think it is fine.")
    await rig.channel.reply(question, answer)
    await rig.channel.reply(question, answer)  # offered again (a restart's catch-up)
    [(_, raw)] = accounts.mailbox(accounts.person)
    sent = email.message_from_bytes(raw, policy=email.policy.default)
    original = email.message_from_bytes(accounts.mailbox(accounts.agent)[0][1])
    assert sent["Subject"] == "Re: Budget"  # "Re: " once
    assert sent["In-Reply-To"] == original["Message-ID"]
    assert " ".join(sent["References"].split()) == f"<root@mail.test> {original['Message-ID']}"
    assert sent["From"] == f"Noema <{accounts.agent_address}>"
    assert sent.get_content().strip() == "I think it is fine."


async def test_a_question_the_channel_did_not_take_is_ignored(rig):
    typed = rig.store.append(NewTurn(TurnKind.USER, "typed", channel="email"))
    await rig.channel.reply(typed, answer_turn(rig, "an answer"))
    assert rig.accounts.smtp.envelopes == [] or all(
        rig.accounts.person_address not in e.recipients for e in rig.accounts.smtp.envelopes)


async def test_an_answer_owed_before_a_crash_is_sent_on_the_next_start(accounts, tmp_path):
    first = await make_rig(accounts, tmp_path)
    await first.until(lambda: first.channel.sensor.looks >= 1, "the first look")
    question = await persons_mail(first, "Owed")
    answer = answer_turn(first, "Sent after the restart.")
    # The process died after keeping the answer in the outbox, before sending it.
    owed = first.channel.state.owe(answer.id, question.id, (accounts.person_address,),
                                   b"From: x\r\nTo: y\r\nSubject: z\r\n\r\nplaceholder\r\n")
    assert not owed.sent
    await first.stop()
    second = await make_rig(accounts, tmp_path)
    try:
        assert second.channel.state.owed(answer.id).sent
        assert len(accounts.mailbox(accounts.person)) == 1
        await second.channel.reply(question, answer)  # the router's catch-up: not again
        assert len(accounts.mailbox(accounts.person)) == 1
    finally:
        await second.stop()


async def test_a_crash_between_submit_and_the_record_takes_the_mail_once(accounts, tmp_path):
    first = await make_rig(accounts, tmp_path)
    await first.until(lambda: first.channel.sensor.looks >= 1, "the first look")
    await first.stop()
    # Two mails; the crash came after the first was stored, before the record said so.
    accounts.deliver(mail(accounts.person_address, accounts.agent_address, "stored", "1"))
    accounts.deliver(mail(accounts.person_address, accounts.agent_address, "not yet", "2"))
    raws = accounts.mailbox(accounts.agent)
    root = next(tmp_path.rglob("mail.db"))
    state = MailState(root)
    with imaplib.IMAP4("127.0.0.1", accounts.dovecot.port) as imap:
        imap.login(accounts.agent, PASSWORD)
        _, [line] = imap.status("INBOX", "(UIDVALIDITY)")
        validity = int(line.split()[-1].rstrip(b")"))
    for uid, raw in raws:  # both were recorded as pending

        m = read_mail(uid, raw)
        header = header_line(m, "INBOX", validity)
        state.begin("INBOX", validity, uid, header=header, sender=m.from_address,
                    subject=m.subject, message_id=m.message_id, references=m.references)
    state.close()
    # The first was submitted: its turn is in the store.
    store = TurnStore(root.parent / "turns.db")
    first_mail = read_mail(raws[0][0], raws[0][1])
    store.append(NewTurn(TurnKind.USER, header_line(first_mail, "INBOX", validity) + "\n1",
                         channel="email", sender=accounts.person_address))
    store.close()
    second = await make_rig(accounts, tmp_path)
    try:
        await second.until(lambda: len(second.person_turns()) == 2, "both mails, once each")
        await second.until(lambda: second.channel.sensor.looks >= 1, "a look")
        contents = [t.content.split("\n", 1)[1] for t in second.person_turns()]
        assert contents == ["1", "2"]
        assert second.channel.state.pending() == []
    finally:
        await second.stop()


async def test_a_damaged_state_file_is_moved_aside_and_mail_keeps_working(accounts, tmp_path):
    first = await make_rig(accounts, tmp_path)
    await first.until(lambda: first.channel.sensor.looks >= 1, "the first look")
    await first.stop()
    state_file = next(tmp_path.rglob("mail.db"))
    for leftover in state_file.parent.glob("mail.db-*"):
        leftover.unlink()
    state_file.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    second = await make_rig(accounts, tmp_path)
    try:
        assert any("mail state file was damaged" in n for n in second.notices)
        assert list(state_file.parent.glob("mail.db.damaged-*"))
        await second.until(lambda: second.channel.sensor.looks >= 1, "the first look")
        await persons_mail(second, "After the damage")
    finally:
        await second.stop()
