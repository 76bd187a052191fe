"""A person's mail, through the whole agent, to an answer in their mailbox, in the thread."""

from __future__ import annotations

import asyncio
import email
import email.policy

from noema.config import Config
from noema.providers.scripted import ScriptedProvider, say
from noema.security.settings import FilesSettings, RootSettings

from .conftest import WAIT, RecordingApprover, mail, mail_agent, mail_agent_paths


async def test_a_persons_mail_starts_a_cycle_whose_answer_arrives_in_the_thread(
        accounts, tmp_path):
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
                    mail=accounts.settings())
    model = ScriptedProvider([say("Tuesday works for me.")])
    async with mail_agent(mail_agent_paths(tmp_path), config, model, RecordingApprover()):
        question = mail(f"Ana <{accounts.person_address}>", accounts.agent_address,
                        "Meeting", "Does Tuesday suit you?",
                        auth="127.0.0.1; spf=pass smtp.mailfrom=" + accounts.person_address)
        accounts.deliver(question)
        envelopes = await asyncio.to_thread(
            accounts.smtp.wait_for,
            lambda found: any(accounts.person_address in e.recipients for e in found), WAIT)
        sent = email.message_from_bytes(
            next(e for e in envelopes if accounts.person_address in e.recipients).data,
            policy=email.policy.default)
        assert sent["Subject"] == "Re: Meeting"
        assert sent["In-Reply-To"] == question["Message-ID"]
        assert sent.get_content().strip() == "Tuesday works for me."
        # The model saw the person's message, with the mail's header line, as the user.
        users = [m for m in model.requests[0].messages if m.role == "user"]
        assert users and "Does Tuesday suit you?" in users[-1].content
        assert f'\n[email from {accounts.person_address} (name "Ana")' in users[-1].content
        # And the answer is in the person's mailbox, delivered by the relay.
        [(_, raw)] = accounts.mailbox(accounts.person)
        assert email.message_from_bytes(raw)["In-Reply-To"] == question["Message-ID"]
