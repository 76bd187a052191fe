"""What the mail benches share: a real Dovecot and SMTP relay on 127.0.0.1
(the tests' instance), an agent account and the person's, and a whole agent
reading that account, started and looking at its inbox.

    async with mail_agent(provider) as room:
        room.dovecot.deliver(room.agent_user, raw)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.mail

from noema.app import App, build_app  # noqa: E402
from noema.channels.mail import MailSettings  # noqa: E402
from noema.config import Config  # noqa: E402
from noema.paths import AgentPaths  # noqa: E402
from noema.security.settings import FilesSettings, RootSettings  # noqa: E402
from tests.mail.servers import MAIL_DOMAIN, PASSWORD, Dovecot, SmtpRelay  # noqa: E402


@dataclass
class MailRoom:
    """The servers, the two accounts and the running agent."""

    dovecot: Dovecot
    relay: SmtpRelay
    agent_user: str
    person_address: str
    settings: MailSettings
    workspace: Path
    app: App


@asynccontextmanager
async def mail_agent(provider, *, mail: dict[str, Any] | None = None,
                     **config: Any) -> AsyncIterator[MailRoom]:
    """A started agent over fresh accounts; `mail` adds to its `[mail]`
    settings and `config` to its configuration."""
    dovecot = Dovecot.create()
    dovecot.start()
    relay = SmtpRelay(dovecot)
    relay.start()
    try:
        agent_user, person = dovecot.new_user("agent"), dovecot.new_user("ana")
        person_address = f"{person}@{MAIL_DOMAIN}"
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            paths = AgentPaths.for_agent("bench", root / "home")
            paths.ensure()
            paths.secrets_file.write_text(f'NOEMA_MAIL_PASSWORD = "{PASSWORD}"\n')
            settings = MailSettings(
                imap_host="127.0.0.1", imap_port=dovecot.port, imap_security="none",
                smtp_host="127.0.0.1", smtp_port=relay.port, smtp_security="none",
                username=agent_user, address=f"{agent_user}@{MAIL_DOMAIN}",
                allow_from=(person_address,), **(mail or {}))
            app = build_app(paths, Config(files=FilesSettings(roots=(RootSettings(
                path=root / "ws"),)), mail=settings, **config), provider=provider)
            try:
                await app.start()
                [channel] = app.channels
                looked = asyncio.Event()
                channel.sensor.on_look = lambda looks: looked.set()
                await asyncio.wait_for(looked.wait(), 60)
                yield MailRoom(dovecot, relay, agent_user, person_address, settings,
                               root / "ws", app)
            finally:
                await app.aclose()
    finally:
        relay.stop()
        dovecot.stop()
