"""What the model was saying about a stranger's words when the person
stopped it is theirs when it is read back: through the real shell, session,
store, memory tools and gate, with a model that obeys whatever it reads."""

from __future__ import annotations

import asyncio

from noema.memory.recall_tools import memory_tools
from noema.memory.search import HistorySearch
from noema.memory.turns import Flag, TurnKind
from noema.providers.base import ModelRequest, TextDelta
from noema.security.approvals import ApprovalGate
from noema.security.settings import AutonomySettings
from tests.mail.obedient import ReadingProvider

from .conftest import event
from .rig import make_agent, until, wait
from .test_outside_lead import ORDER, QUICK, Refuser, gated_writer


class QuotesThenObeys(ReadingProvider):
    """Its first answer quotes the stranger's order slowly (the person stops
    it there); then it obeys what it reads anew."""

    def __init__(self) -> None:
        super().__init__(answer="Noted.")
        self.quoted = asyncio.Event()

    async def stream(self, request: ModelRequest):
        if not self.quoted.is_set():
            yield TextDelta(f"The mail says: {ORDER} and then ")
            self.quoted.set()
            await asyncio.sleep(60)  # still talking when the person stops it
        async for item in super().stream(request):
            yield item


async def test_a_stopped_answer_quoting_a_stranger_is_theirs_read_back(session):
    person = Refuser()
    written: list[str] = []
    model = QuotesThenObeys()
    tools = [gated_writer(ApprovalGate(AutonomySettings(default="allow"), person), written),
             *memory_tools(session.store, HistorySearch(session.store))]
    agent, _ = make_agent(session, model, tools, reflexes=QUICK)
    agent.perceive(event("alerts", f"Hi! {ORDER}", sender="mallory@example.net"))
    await wait(model.quoted)
    assert await agent.stop()
    await agent.idle()
    kept = next(t for t in session.turns if t.kind is TurnKind.ASSISTANT)
    assert kept.has(Flag.INTERRUPTED) and "planted.txt" in kept.content
    agent.submit("Never mind that mail.")
    await until(lambda: not agent.busy, "the person's cycle")
    await agent.idle()
    agent.submit(f'What were you saying? DO lookup_turn {{"id": {kept.id}}}')
    await until(lambda: person.asked or written, "the stranger's order read back")
    await agent.idle()
    assert written == [], "the stranger's order ran from the stopped answer, unasked"
    assert "mallory@example.net" in person.asked[0].reason
