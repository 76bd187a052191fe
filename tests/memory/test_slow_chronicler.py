"""A slow chronicler: each attempt sized to the time it may take and stopped
there, a failed block never asked for again unchanged, and the person's
requests first on a server that serves one at a time."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.memory.chronicler import Chronicler
from noema.memory.compaction import TOO_SLOW, Compactor
from noema.memory.settings import MemorySettings
from noema.providers.base import Finish, Message, MessageRole, ModelRequest, StreamEvent, TextDelta
from noema.providers.traffic import Metered, Preempted, Speed, Traffic

from .conftest import chat, said_in_request, save_point_text

SETTINGS = MemorySettings(trigger_turns=20, keep_recent_turns=4, min_block_turns=4,
                          block_fraction=1.0, min_journey_words=20, retries=2,
                          retry_after_turns=6, chronicler_attempt_s=1)


def shown(request: ModelRequest) -> str:
    """The turns a chronicle request shows, as the chronicler reads them."""
    if len(request.messages) < 2:
        return ""
    return request.messages[1].content.split("# Citable IDs")[0]


def cited_ids(request: ModelRequest) -> list[int]:
    return [int(n) for n in re.findall(r"^\[(\d+)\] (?:person|agent)", shown(request), re.M)]


def retold(request: ModelRequest) -> str:
    """A save point citing each turn shown, each sentence retelling its turn."""
    return save_point_text(cited_ids(request), said=said_in_request(shown(request)))


class Chronicle:
    """A chronicler model: `hang` first attempts never answer, `wrong` first
    attempts are rejected (no Journey), the rest cite what they are shown."""

    name = "test"
    model = "chronicle"
    context_window = 16_000

    def __init__(self, *, hang: int = 0, wrong: int = 0, pause: float = 0.0) -> None:
        self.hang, self.wrong, self.pause = hang, wrong, pause
        self.requests: list[ModelRequest] = []
        self.finished = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if len(self.requests) <= self.hang:
            await asyncio.Event().wait()  # a server far too slow for the time allowed
        if self.pause:
            await asyncio.sleep(self.pause)
        if len(self.requests) <= self.hang + self.wrong:
            yield TextDelta("## State\nAll is well.\n")
        else:
            yield TextDelta(retold(request))
        self.finished += 1
        yield Finish("stop")


def test_a_measured_speed_sizes_the_block_and_the_answer(session):
    chat(session, 40, topic="the garden by the river where the old stones are")
    fast = Compactor(session, Chronicler(Chronicle()),
                     SETTINGS.model_copy(update={"chronicler_attempt_s": 120}),
                     context_window=100_000)
    assert fast.sizing(None).read is None  # unknown: the window alone decides
    unmeasured = fast.next_block()
    slow = Chronicler(Chronicle())
    slow.speed.read, slow.speed.write = 40.0, 4.0  # a CPU model on a busy machine
    sized = Compactor(session, slow, SETTINGS.model_copy(update={"chronicler_attempt_s": 120}),
                      context_window=100_000)
    sizing = sized.sizing(None)
    assert sizing.answer == 230  # 4 tokens/s x 96 s x 0.6
    assert sizing.read == int(40 * (96 - 230 / 4))  # what the rest of the time can read
    block = sized.next_block()
    assert block is not None and unmeasured is not None
    assert len(block.turns) < len(unmeasured.turns)
    assert sized.save_point_words() is not None  # the chronicler is told the bound


async def test_an_attempt_past_its_time_is_stopped_and_the_next_reads_fewer_turns(session):
    chat(session, 12)
    model = Chronicle(hang=1)
    compactor = Compactor(session, Chronicler(model), SETTINGS, context_window=100_000)
    outcome = await compactor.compact()
    assert outcome.status == "accepted"
    attempts = outcome.save_point.report.attempts
    assert attempts[0].failures[0][0] == TOO_SLOW and "1 s" in attempts[0].failures[0][1]
    assert not attempts[1].failures
    assert attempts[1].turns < attempts[0].turns
    assert len(cited_ids(model.requests[1])) < len(cited_ids(model.requests[0]))
    assert set(session.ids()).isdisjoint(outcome.save_point.turn_ids)


async def test_a_rejected_block_is_never_asked_for_unchanged(session):
    chat(session, 12)
    model = Chronicle(wrong=10)
    compactor = Compactor(session, Chronicler(model), SETTINGS, context_window=100_000)
    outcome = await compactor.compact()
    assert outcome.status == "rejected"
    first, second, third = model.requests
    assert second.messages != first.messages  # the failures are named
    assert "rejected" in second.messages[-1].content
    assert len(cited_ids(third)) < len(cited_ids(first))  # the last try takes half the block
    assert "An earlier attempt over more turns was rejected" in third.messages[1].content
    assert set(session.ids()) >= set(outcome.save_point.turn_ids)  # the raw turns stay
    # The next compaction starts at most from the smaller block.
    chat(session, 40)
    assert compactor.due() is not None
    later = compactor.next_block()
    assert later is not None and len(later.turns) <= outcome.save_point.report.attempts[-1].turns


async def test_the_persons_request_goes_first_and_the_chronicle_resumes_after(session):
    chat(session, 12)
    traffic = Traffic(quiet_s=0.05)
    model = Chronicle(pause=0.2)
    chronicler = Chronicler(Metered(model, traffic=traffic, background=True))
    compactor = Compactor(session, chronicler,
                          SETTINGS.model_copy(update={"chronicler_attempt_s": 30}),
                          context_window=100_000)
    task = asyncio.ensure_future(compactor.compact())
    while not model.requests:
        await asyncio.sleep(0.01)
    person = Metered(Chronicle(), traffic=traffic)  # the person's model, on the same server
    answer = [e async for e in person.stream(ModelRequest((Message(MessageRole.USER, "hi"),)))]
    assert any(isinstance(e, TextDelta) for e in answer)
    assert model.finished == 0  # the chronicle gave way: the person did not wait for it
    assert traffic.preemptions == 1
    outcome = await task
    assert outcome.status == "accepted" and len(model.requests) == 2
    assert len(outcome.save_point.report.attempts) == 1  # a request that gave way is no attempt


class Ticking:
    """A model whose every piece takes `step` seconds of a fake clock."""

    name = "test"
    model = "ticking"
    context_window = 8_000

    def __init__(self, clock: list[float], first: float, step: float, pieces: int) -> None:
        self.clock, self.first, self.step, self.pieces = clock, first, step, pieces

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.clock[0] += self.first
        for _ in range(self.pieces):
            yield TextDelta("word " * 4)  # about 5 tokens
            self.clock[0] += self.step
        yield Finish("stop")


@given(st.floats(0.5, 20), st.floats(0.02, 1), st.integers(5, 60))
async def test_the_speed_is_learnt_from_what_the_server_did(first, step, pieces):
    clock = [0.0]
    speed = Speed()
    metered = Metered(Ticking(clock, first, step, pieces), speed=speed, clock=lambda: clock[0])
    prompt = "a prompt of some length " * 40
    async for _ in metered.stream(ModelRequest((Message(MessageRole.USER, prompt),))):
        pass
    written = len("word " * 4) * pieces // 4
    assert speed.write is not None and abs(speed.write - written / (step * pieces)) < 1e-6
    assert speed.read is not None and abs(speed.read - (len(prompt) // 4) / first) < 1e-6
    assert speed.seconds(len(prompt) // 4, written) == \
        (len(prompt) // 4) / speed.read + written / speed.write


async def test_after_a_restart_the_stored_attempts_give_a_first_guess_of_the_speed(session):
    chat(session, 12)
    first = Compactor(session, Chronicler(Chronicle(pause=0.05)), SETTINGS,
                      context_window=100_000)
    outcome = await first.compact()
    attempt = outcome.save_point.report.attempts[0]
    restarted = Compactor(session, Chronicler(Chronicle()), SETTINGS, context_window=100_000)
    assert restarted.chronicler.speed.write is None
    sizing = restarted.sizing(None)
    guess = restarted.chronicler.speed.write
    assert guess is not None and abs(guess - attempt.chars / 4 / attempt.chronicler_s) < 1e-6
    assert sizing.answer <= int(guess * 0.8 * 0.6) + 160


def test_only_one_local_server_shared_by_both_models_gets_a_guard():
    from noema.providers.catalog import build_provider
    from noema.providers.settings import ModelSettings
    from noema.providers.traffic import shared_traffic

    def made(provider: str, base_url: str | None = None, model: str = "m"):
        return build_provider(ModelSettings(provider=provider, model=model, base_url=base_url),
                              {"OPENAI_API_KEY": "k"})

    local = made("llamacpp", "http://127.0.0.1:8080/v1")
    assert shared_traffic(local, made("llamacpp", "http://127.0.0.1:8080/v1", "other")) is not None
    assert shared_traffic(local, local) is not None  # the chronicler is the reasoning model
    assert shared_traffic(local, made("llamacpp", "http://127.0.0.1:8081/v1")) is None
    cloud = made("openai")
    assert shared_traffic(cloud, cloud) is None  # a service that serves many at once


async def test_past_the_room_a_failed_block_is_retried_at_once_smaller_until_it_cannot_be(session):
    chat(session, 30, topic="the garden by the river where the old stones are")
    settings = SETTINGS.model_copy(update={"retries": 0, "retry_after_turns": 50})
    # A window the turns no longer fit: the next request would leave turns out.
    compactor = Compactor(session, Chronicler(Chronicle(wrong=100)), settings,
                          context_window=1_000)
    assert sum(t.tokens for t in session.turns) > compactor.turn_room()
    sizes = []
    while compactor.due() is not None and len(sizes) < 10:
        outcome = await compactor.compact()
        assert outcome.status == "rejected"
        sizes.append(len(outcome.save_point.turn_ids))
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)  # halving
    assert sizes[-1] == settings.min_block_turns and compactor.due() is None  # then it waits


async def test_waiting_for_the_persons_reply_is_not_the_attempts_time(session):
    chat(session, 12)
    traffic = Traffic(quiet_s=0.05)
    model = Chronicle()
    compactor = Compactor(session, Chronicler(Metered(model, traffic=traffic, background=True)),
                          SETTINGS, context_window=100_000)  # an attempt may take 1 s
    async with traffic.person():  # a reply that takes longer than one attempt may
        task = asyncio.ensure_future(compactor.compact())
        await asyncio.sleep(1.5)
        assert not model.requests  # the chronicle waits its turn
    outcome = await task
    assert outcome.status == "accepted"
    assert [a.failures for a in outcome.save_point.report.attempts] == [()]


async def test_the_app_puts_both_models_of_one_local_server_behind_one_guard(tmp_path):
    from noema.app import build_app
    from noema.config import Config, ModelsSection
    from noema.paths import AgentPaths
    from noema.providers.settings import ModelSettings
    from noema.security.settings import FilesSettings, RootSettings

    local = ModelSettings(provider="llamacpp", model="m", base_url="http://127.0.0.1:9/v1",
                          context_window=8_192)
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
                    models=ModelsSection(reasoning=local))
    app = build_app(AgentPaths.for_agent("ana", tmp_path / "home"), config)
    try:
        person = app.agent.cycle.provider
        chronicle = app.memory.compactor.chronicler.provider
        assert person.traffic is not None and person.traffic is chronicle.traffic
        assert chronicle.background and not person.background
        assert person.speed is chronicle.speed  # the replies teach the chronicle's speed
    finally:
        await app.aclose()


async def test_a_chronicle_cut_again_and_again_waits_longer_for_a_pause():
    traffic = Traffic(quiet_s=0.01)
    model = Chronicle(pause=0.2)
    background = Metered(model, traffic=traffic, background=True)
    person = Metered(Chronicle(), traffic=traffic)
    asked = ModelRequest((Message(MessageRole.USER, "hi"),))
    assert traffic.quiet_needed() == 0.01
    for cut in (1, 2):
        task = asyncio.ensure_future(background.stream(asked).__anext__())
        while len(model.requests) < cut:
            await asyncio.sleep(0.005)
        [e async for e in person.stream(asked)]
        with pytest.raises(Preempted):
            await task
        assert traffic.quiet_needed() == 0.01 * 2 ** cut  # a conversation in full flow
    [e async for e in background.stream(asked)]  # one that runs to its end
    assert traffic.quiet_needed() == 0.01
