"""What the person hears of compaction: a notice when a save point is begun and
when it is written or refused (with why), a status line while it works, the
log, and `noema memory` that never speaks of a save point that is not there."""

from __future__ import annotations

import asyncio
import logging

from noema.app import build_app
from noema.config import Config
from noema.interfaces.commands.memory import list_save_points
from noema.memory.activity import MemoryActivity
from noema.memory.chronicler import Chronicler
from noema.memory.compaction import Compactor
from noema.orchestrator.agent import AgentListener
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, say
from noema.security.settings import FilesSettings, RootSettings

from .conftest import chat
from .test_compaction import SETTINGS, ReadingChronicler
from .test_small_windows import Reader, prose


async def test_a_refused_save_point_is_told_with_why_and_the_raw_turns_are_kept(session, caplog):
    chat(session, 12)
    said: list[str] = []
    activity = MemoryActivity(say=said.append)
    gate = asyncio.Event()
    model = ReadingChronicler(invent=99, gate=gate)
    compactor = Compactor(session, Chronicler(model), SETTINGS, context_window=100_000,
                          listener=activity)
    assert activity.line() == ""
    caplog.set_level(logging.INFO, logger="noema.memory.activity")
    task = asyncio.ensure_future(compactor.compact())
    await model.started.wait()
    assert activity.line().startswith("writing a save point of ") and "attempt 1 of 3" in \
        activity.line()
    assert said and said[0].startswith("memory: writing a save point of turns 1–")
    gate.set()
    outcome = await task
    assert outcome.status == "rejected"
    assert "refused" in said[-1] and "987654" in said[-1] and "stay as they are" in said[-1]
    assert activity.line().startswith("no save point: ")
    assert activity.line().endswith("the raw turns are kept")
    assert sum("rejected" in r.message for r in caplog.records) == 3  # each attempt, logged
    # `noema memory` lists it, and says no save point is in the context.
    listing = list_save_points(session.store, session)
    assert "the save point in the context now" not in listing
    assert "No save point is in the context now" in listing


class Heard(AgentListener):
    def __init__(self) -> None:
        self.memory: list[str] = []

    def on_memory(self, text: str) -> None:
        self.memory.append(text)


async def test_the_app_tells_the_person_what_memory_writes(tmp_path):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    model = ScriptedProvider([say(f"reply {n}: " + prose(100 + n, 30)) for n in range(12)],
                             context_window=4_096)
    heard = Heard()
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
                    memory=SETTINGS.model_copy(update={"trigger_turns": 400}))
    app = build_app(paths, config, provider=model, chronicler=Reader(4_096), listener=heard)
    try:
        await app.start()
        for n in range(12):
            app.agent.submit(prose(n))
            await app.agent.idle()
            while app.memory.compactor.busy:
                await asyncio.sleep(0.01)
        assert any(text.startswith("memory: writing a save point") for text in heard.memory)
        assert any(text.startswith("memory: save point 1 written") for text in heard.memory)
        assert app.memory.activity.line() == ""  # nothing being written, nothing failed
    finally:
        await app.aclose()


async def test_a_chronicler_too_slow_for_the_time_allowed_is_named_once(session):
    chat(session, 12)
    said: list[str] = []
    chronicler = Chronicler(ReadingChronicler())
    chronicler.speed.read, chronicler.speed.write = 5.0, 2.0  # a machine far too busy
    compactor = Compactor(session, chronicler, SETTINGS, context_window=100_000,
                          listener=MemoryActivity(say=said.append))
    for _ in range(2):
        outcome = await compactor.compact()
        assert outcome.status == "nothing" and "too slow" in outcome.reason
    assert len(said) == 1 and "memory.chronicler_attempt_s" in said[0]
    assert "reads 5 tokens/s" in said[0]
