"""The composition root wires the parts so they work together."""

import asyncio

from noema.app import build_app
from noema.config import Config
from noema.memory.settings import MemorySettings
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, say
from noema.security.settings import FilesSettings, RootSettings

SAVE_POINT = """## State
The person is choosing a name for a boat {cite:1}.

## The Journey
The person opened by saying they had bought an old wooden boat and wanted a name for it \
{cite:1}. The agent suggested looking at the boat's history first, since a renamed boat \
carries its past with it {cite:2}, and the person agreed to look for the registration papers \
before deciding anything {cite:3}.
"""


def config_for(tmp_path) -> Config:
    return Config(
        files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
        memory=MemorySettings(trigger_turns=8, keep_recent_turns=2, min_block_turns=2,
                              min_journey_words=10),
    )


async def test_after_a_cycle_the_wired_compactor_writes_a_save_point(tmp_path):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    model = ScriptedProvider([say(f"reply {i}") for i in range(10)])
    chronicler = ScriptedProvider([say(SAVE_POINT)])
    app = build_app(paths, config_for(tmp_path), provider=model, chronicler=chronicler)
    try:
        await app.start()
        for text in ("I bought an old wooden boat, what should I call it?",
                     "Good idea, I will look for the papers.", "Found them.", "It was Marta.",
                     "Marta it stays, then."):
            app.agent.submit(text)
            await app.agent.idle()
        # The compaction runs in the background, and on a loaded machine it gets
        # little CPU: a generous deadline, not a count of pauses.
        deadline = asyncio.get_running_loop().time() + 30
        while app.session.save_point_id is None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        assert app.session.save_point_id is not None, "the compactor never ran after a cycle"
        assert app.session.ids()[0] > 3  # the block left the context
        assert "{cite:2}" in app.agent.cycle.system_prompt()  # the chronicle is in the prompt
        assert chronicler.requests, "the chronicler was the configured one"
        assert app.agent.status().context_tokens > 0
        assert "lookup_turn" in app.tools and "file_write" in app.tools
        assert "pool_event" in app.tools and "get_current_time" in app.tools
    finally:
        await app.aclose()
