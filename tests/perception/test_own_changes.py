"""A watched folder does not tell the agent about its own writes, and still
tells it about the person's (`perception.own_changes`, through the app)."""

from __future__ import annotations

import asyncio

from noema.app import build_app
from noema.config import Config
from noema.memory.turns import TurnKind
from noema.paths import AgentPaths
from noema.perception.own_changes import OwnChanges
from noema.perception.settings import FolderSettings, PerceptionSettings
from noema.providers.scripted import ScriptedProvider, call, say
from noema.security.settings import AutonomySettings, FilesSettings, RootSettings


def test_a_file_looks_own_until_someone_else_changes_it(tmp_path):
    now = [0.0]
    own = OwnChanges(keep_s=60, clock=lambda: now[0])
    (tmp_path / "a.txt").write_text("agent")
    own.record(tmp_path, ["a.txt", "gone.txt"])
    assert own.is_own(tmp_path / "a.txt")
    assert own.is_own(tmp_path / "gone.txt")  # deleted by the agent, still absent
    assert not own.is_own(tmp_path / "other.txt")
    (tmp_path / "a.txt").write_text("the person, longer")
    assert not own.is_own(tmp_path / "a.txt")
    (tmp_path / "gone.txt").write_text("back")
    assert not own.is_own(tmp_path / "gone.txt")


def test_the_hidden_file_of_an_atomic_write_is_own(tmp_path):
    own = OwnChanges(temp_suffix=".noema-tmp")
    assert own.is_own(tmp_path / ".notes.md.1a2b.noema-tmp")
    assert not own.is_own(tmp_path / "notes.md.noema-tmp")  # not hidden: someone else's


def test_an_entry_is_forgotten_after_its_time(tmp_path):
    now = [0.0]
    own = OwnChanges(keep_s=5, clock=lambda: now[0])
    (tmp_path / "a.txt").write_text("agent")
    own.record(tmp_path, ["a.txt"])
    now[0] = 6.0
    assert not own.is_own(tmp_path / "a.txt")


async def test_the_agents_write_is_not_news_and_the_persons_is(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    config = Config(
        files=FilesSettings(roots=(RootSettings(path=ws),)),
        autonomy=AutonomySettings(default="allow"),
        perception=PerceptionSettings(folders=[FolderSettings(path=ws, debounce_ms=10)]),
    )
    model = ScriptedProvider([say("", call("file_write", path="by-agent.txt", content="x")),
                              say("Written.")] + [say("Seen.")] * 5)
    app = build_app(AgentPaths.for_agent("ana", tmp_path / "home"), config, provider=model)
    try:
        await app.start()
        app.agent.submit("Write by-agent.txt.")
        await app.agent.idle()
        assert (ws / "by-agent.txt").exists()
        # The watch is running: it saw the agent's write (and left it out).
        (ws / "by-person.txt").write_text("y")
        events = []
        for _ in range(600):  # a discrete run is delivered once quiet for a few seconds
            await asyncio.sleep(0.05)
            events = [t for t in app.session.turns if t.kind is TurnKind.EVENT]
            if events:
                break
        assert events, "the folder sensor reported nothing"
        await app.agent.idle()
        text = "\n".join(t.content for t in app.session.turns if t.kind is TurnKind.EVENT)
        assert "by-person.txt" in text
        assert "by-agent.txt" not in text  # nor its temporary file
    finally:
        await app.aclose()
