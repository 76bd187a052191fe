"""A real agent with the Telegram channel, for the kill -9 test: it kills it.

Usage: python kill_child.py HOME BASE_URL. Prints READY once started and
TAKEN <text> each time the channel's message is stored by the agent.
"""

import asyncio
import os
import sys
from pathlib import Path

from noema.app import build_app
from noema.channels.telegram.settings import TelegramSettings
from noema.config import Config
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, say
from noema.security.settings import FilesSettings, RootSettings

TOKEN = "123456:TEST-token-for-the-fake-bot-api"
CHAT = 4242


async def main(home: Path, base_url: str) -> None:
    paths = AgentPaths.for_agent("ana", home)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.secrets_file.write_text(f'TELEGRAM_BOT_TOKEN = "{TOKEN}"\n')
    os.chmod(paths.secrets_file, 0o600)
    config = Config(files=FilesSettings(roots=(RootSettings(path=home / "ws"),)),
                    telegram=TelegramSettings(chat_ids=(CHAT,), base_url=base_url,
                                              quiet_window_s=0.05, poll_timeout_s=5))
    app = build_app(paths, config, provider=ScriptedProvider([say(f"ok {n}")
                                                              for n in range(1000)]))
    submit = app.agent.submit

    def announced(text, **kwargs):
        turn = submit(text, **kwargs)
        print("TAKEN", text.replace("\n", " "), flush=True)
        return turn

    app.agent.submit = announced
    await app.start()
    print("READY", flush=True)
    await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
