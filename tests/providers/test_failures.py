"""Both adapters when the server misbehaves: retries, and errors a person can act on."""

from __future__ import annotations

import pytest

from noema.providers.base import (
    AuthenticationFailed,
    BadRequest,
    Message,
    MessageRole,
    ModelNotFound,
    ModelRequest,
    ProtocolViolation,
    ProviderUnavailable,
    TextDelta,
)
from tests.fakes import FakeFailure, FakeReply

from .conftest import Rig, SleepRecorder, free_port, simple_request


async def texts(provider) -> str:
    return "".join([e.text async for e in provider.stream(simple_request()) if isinstance(e, TextDelta)])


async def test_429_with_retry_after_is_honoured(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.script(FakeFailure(429, "slow down", retry_after=2.5), FakeReply(text="made it"))

    assert await texts(rig.make()) == "made it"
    assert sleeps.waits == [2.5]
    assert len(rig.server.requests) == 2


async def test_retry_after_is_capped(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.script(FakeFailure(429, retry_after=86400), FakeReply(text="ok"))

    await texts(rig.make())
    assert sleeps.waits == [60.0]


async def test_server_errors_back_off_exponentially_with_jitter(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.script(FakeFailure(500), FakeFailure(503), FakeFailure(529), FakeReply(text="ok"))

    assert await texts(rig.make()) == "ok"
    assert len(sleeps.waits) == 3
    for retry, wait in enumerate(sleeps.waits):
        assert 0 <= wait <= 0.5 * 2**retry


async def test_gives_up_after_max_retries_saying_what_and_how_often(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.default = FakeFailure(503, "upstream is down")

    with pytest.raises(ProviderUnavailable) as caught:
        await texts(rig.make(max_retries=2))
    message = str(caught.value)
    assert "HTTP 503" in message and "upstream is down" in message
    assert "3 attempts" in message
    assert rig.server.base_url in message
    assert len(rig.server.requests) == 3
    assert len(sleeps.waits) == 2


async def test_connection_refused_is_retried_then_reported(rig: Rig, sleeps: SleepRecorder) -> None:
    provider = rig.make(base_url=f"http://127.0.0.1:{free_port()}", max_retries=1)

    with pytest.raises(ProviderUnavailable) as caught:
        await texts(provider)
    assert "could not connect" in str(caught.value)
    assert "2 attempts" in str(caught.value)
    assert len(sleeps.waits) == 1


async def test_no_retry_once_the_first_event_is_out(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.script(FakeReply(text="one two three four five six", cut="drop", cut_after=4))
    received: list[str] = []

    with pytest.raises(ProviderUnavailable) as caught:
        async for event in rig.make().stream(simple_request()):
            if isinstance(event, TextDelta):
                received.append(event.text)
    assert received  # part of the answer was passed on...
    assert "broke off" in str(caught.value)
    assert len(rig.server.requests) == 1  # ...and never replayed
    assert sleeps.waits == []


async def test_error_event_mid_answer_is_not_retried(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.script(FakeReply(text="one two three four", cut="error", cut_after=4))

    with pytest.raises(ProviderUnavailable, match="overloaded"):
        await texts(rig.make())
    assert len(rig.server.requests) == 1


async def test_anthropic_error_event_before_any_content_is_retried(
    anthropic_rig: Rig, sleeps: SleepRecorder
) -> None:
    # message_start carries nothing of the answer, so nothing has been passed on yet.
    anthropic_rig.server.script(FakeReply(text="lost", cut="error", cut_after=1), FakeReply(text="kept"))

    assert await texts(anthropic_rig.make()) == "kept"
    assert len(sleeps.waits) == 1


async def test_rejected_key_names_the_variable_and_endpoint(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.script(FakeFailure(401, "invalid x-api-key"))
    key_env = "OPENAI_API_KEY" if rig.protocol == "openai" else "ANTHROPIC_API_KEY"
    provider_name = "openai" if rig.protocol == "openai" else "anthropic"
    provider = rig.make(provider=provider_name, secrets={key_env: "sk-very-secret"})

    with pytest.raises(AuthenticationFailed) as caught:
        await texts(provider)
    message = str(caught.value)
    assert f"the key in {key_env} was rejected by" in message
    assert rig.server.base_url in message
    assert "sk-very-secret" not in message
    assert len(rig.server.requests) == 1 and sleeps.waits == []


async def test_forbidden_without_a_key_suggests_setting_one(openai_rig: Rig) -> None:
    openai_rig.server.script(FakeFailure(403, "key required"))

    with pytest.raises(AuthenticationFailed, match="set api_key_env"):
        await texts(openai_rig.make())


async def test_unknown_model_names_model_and_endpoint(rig: Rig) -> None:
    rig.server.script(FakeFailure(404, "model: ghost-1 does not exist", code=None))

    with pytest.raises(ModelNotFound) as caught:
        await texts(rig.make(model="ghost-1"))
    assert "'ghost-1'" in str(caught.value)
    assert rig.server.base_url in str(caught.value)
    assert len(rig.server.requests) == 1


async def test_model_not_found_code_on_a_400_is_still_model_not_found(openai_rig: Rig) -> None:
    openai_rig.server.script(FakeFailure(400, "no such model", code="model_not_found"))

    with pytest.raises(ModelNotFound):
        await texts(openai_rig.make())


async def test_bad_request_carries_the_servers_message(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.script(FakeFailure(400, "prompt is too long: 250000 tokens > 200000 maximum"))

    with pytest.raises(BadRequest, match="prompt is too long: 250000 tokens"):
        await texts(rig.make())
    assert sleeps.waits == []


async def test_garbage_in_the_stream_is_a_protocol_violation(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.script(FakeReply(text="hello", cut="garbage", cut_after=0))

    with pytest.raises(ProtocolViolation, match="not valid JSON"):
        await texts(rig.make())
    assert len(rig.server.requests) == 1 and sleeps.waits == []


async def test_a_request_we_cannot_convert_is_our_bug_and_never_sent(rig: Rig, sleeps: SleepRecorder) -> None:
    broken = ModelRequest((Message(MessageRole.TOOL, "answer to nothing"),))

    with pytest.raises(ValueError, match="tool_call_id"):
        [e async for e in rig.make().stream(broken)]
    assert rig.server.requests == [] and sleeps.waits == []


async def test_a_server_that_goes_quiet_times_out_and_is_retried(rig: Rig, sleeps: SleepRecorder) -> None:
    rig.server.tokens_per_second = 0.1  # the first event at once, the next after 10 s
    rig.server.default = FakeReply(text="never arrives")

    with pytest.raises(ProviderUnavailable) as caught:
        await texts(rig.make(timeout_s=0.3, max_retries=1))
    assert "no data for 0.3 s" in str(caught.value)
    assert len(rig.server.requests) == 2 and len(sleeps.waits) == 1
