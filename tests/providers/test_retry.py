"""The retry policy and failure descriptions, without any network."""

from __future__ import annotations

import email.utils
import time

import pytest

from noema.providers.base import (
    AuthenticationFailed,
    BadRequest,
    ModelNotFound,
    ProtocolViolation,
    ProviderUnavailable,
    RetryWait,
    TextDelta,
)
from noema.providers.endpoint import Endpoint
from noema.providers.failures import (
    Failure,
    FailureKind,
    failure_from_response,
    failure_from_stream_error,
    provider_error,
    retry_after_seconds,
    server_message,
)
from noema.providers.retry import RetryPolicy, stream_with_retry

from .conftest import SleepRecorder

ENDPOINT = Endpoint("openrouter", "OpenRouter", "https://openrouter.example/api/v1", "some/model",
                    key_env="OPENROUTER_API_KEY", api_key="sk-or-hidden")


def test_backoff_is_exponential_with_full_jitter_and_a_ceiling() -> None:
    top = RetryPolicy(base_delay_s=0.5, max_delay_s=5, jitter=lambda: 1.0)
    bottom = RetryPolicy(jitter=lambda: 0.0)

    assert [top.delay(n) for n in range(6)] == [0.5, 1, 2, 4, 5, 5]
    assert bottom.delay(3) == 0


def test_retry_after_wins_over_backoff_but_is_capped() -> None:
    policy = RetryPolicy(max_retry_after_s=30, jitter=lambda: 1.0)

    assert policy.delay(0, retry_after_s=7) == 7
    assert policy.delay(0, retry_after_s=3600) == 30


def test_negative_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)


def test_retry_after_forms() -> None:
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)

    assert retry_after_seconds({"retry-after": "4"}) == 4
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert 20 < retry_after_seconds({"retry-after": soon}) <= 30
    assert retry_after_seconds({"retry-after": "soon-ish"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.parametrize(("body", "expected"), [
    ({"error": {"message": "bad", "type": "invalid_request_error", "code": None}}, ("bad", "invalid_request_error")),
    ({"message": "inner only", "code": "model_not_found"}, ("inner only", "model_not_found")),
    ({"error": "model 'x' not found, try pulling it first"}, ("model 'x' not found, try pulling it first", None)),
    ({"detail": "Not Found"}, ("Not Found", None)),
    ("  upstream timeout  ", ("upstream timeout", None)),
    (None, (None, None)),
])
def test_server_messages_of_every_common_shape(body, expected) -> None:
    assert server_message(body) == expected


def test_stream_error_types_map_to_statuses() -> None:
    assert failure_from_stream_error({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
                                     "x").status == 529
    assert failure_from_stream_error({"error": {"type": "invalid_request_error"}}, "x").retryable is False
    assert failure_from_stream_error("gibberish", "fallback").status == 500


@pytest.mark.parametrize(("failure", "kind", "phrases"), [
    (failure_from_response(401, {}, {"error": {"message": "nope"}}, ""), AuthenticationFailed,
     ["the key in OPENROUTER_API_KEY was rejected by OpenRouter at https://openrouter.example/api/v1", "check it"]),
    (failure_from_response(404, {}, None, "Not Found"), ModelNotFound, ["'some/model'", "base_url"]),
    (failure_from_response(422, {}, {"detail": "messages: field required"}, ""), BadRequest,
     ["HTTP 422", "messages: field required"]),
    (failure_from_response(503, {}, None, "Service Unavailable"), ProviderUnavailable,
     ["kept failing", "HTTP 503", "5 attempts"]),
    (Failure(FailureKind.TIMEOUT, "ReadTimeout"), ProviderUnavailable, ["no data for 120 s"]),
    (Failure(FailureKind.TIMEOUT, "ConnectTimeout", connecting=True), ProviderUnavailable,
     ["no connection within 10 s"]),
    (Failure(FailureKind.PROTOCOL, "a delta for block 3"), ProtocolViolation, ["a delta for block 3"]),
])
def test_final_errors_say_what_failed(failure, kind, phrases) -> None:
    error = provider_error(failure, ENDPOINT, attempts=5, mid_stream=False)

    assert type(error) is kind
    for phrase in phrases:
        assert phrase in str(error)
    assert "sk-or-hidden" not in str(error)


def test_the_key_never_appears_in_an_endpoints_repr() -> None:
    assert "sk-or-hidden" not in repr(ENDPOINT)


class Attempts:
    """Scripted attempts: each is a list of events, optionally ending in an exception."""

    def __init__(self, *scripts: list) -> None:
        self.scripts = list(scripts)
        self.started = 0
        self.closed = 0

    def __call__(self):
        script = self.scripts[self.started]
        self.started += 1

        async def run():
            try:
                for item in script:
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            finally:
                self.closed += 1

        return run()


def describe(exc: BaseException) -> Failure | None:
    if isinstance(exc, ConnectionError):
        return Failure(FailureKind.CONNECTION, str(exc))
    if isinstance(exc, PermissionError):
        return Failure(FailureKind.STATUS, "denied", status=403)
    return None


async def run(attempts: Attempts, sleeps: SleepRecorder, retries: int = 3) -> list:
    policy = RetryPolicy(max_retries=retries, sleep=sleeps, jitter=lambda: 1.0)
    stream = stream_with_retry(attempts, endpoint=ENDPOINT, policy=policy, describe=describe)
    return [event async for event in stream]


async def test_failures_before_the_first_event_are_retried(sleeps: SleepRecorder) -> None:
    attempts = Attempts([ConnectionError("refused")], [ConnectionError("refused")], [TextDelta("hi")])

    waits = [RetryWait(1, 3, 0.5, False, "the connection broke (refused)"),
             RetryWait(2, 3, 1.0, False, "the connection broke (refused)")]
    assert await run(attempts, sleeps) == [*waits, TextDelta("hi")]
    assert sleeps.waits == [0.5, 1.0]
    assert waits[1].describe() == "the connection broke (refused); waiting 1 s before retry 2 of 3"
    assert attempts.closed == 3


async def test_a_failure_after_the_first_event_ends_the_stream(sleeps: SleepRecorder) -> None:
    attempts = Attempts([TextDelta("half"), ConnectionError("reset")], [TextDelta("never")])

    with pytest.raises(ProviderUnavailable, match="broke off"):
        await run(attempts, sleeps)
    assert attempts.started == 1 and sleeps.waits == []


async def test_non_retryable_failures_are_raised_at_once(sleeps: SleepRecorder) -> None:
    attempts = Attempts([PermissionError()], [TextDelta("never")])

    with pytest.raises(AuthenticationFailed):
        await run(attempts, sleeps)
    assert attempts.started == 1


async def test_unrecognised_exceptions_are_bugs_and_propagate_unchanged(sleeps: SleepRecorder) -> None:
    attempts = Attempts([KeyError("ours")])

    with pytest.raises(KeyError):
        await run(attempts, sleeps)
    assert attempts.closed == 1


async def test_closing_the_stream_closes_the_attempt(sleeps: SleepRecorder) -> None:
    attempts = Attempts([TextDelta("a"), TextDelta("b"), TextDelta("c")])
    policy = RetryPolicy(sleep=sleeps)
    stream = stream_with_retry(attempts, endpoint=ENDPOINT, policy=policy, describe=describe)

    assert await anext(stream) == TextDelta("a")
    await stream.aclose()
    assert attempts.closed == 1


def test_a_wait_the_server_asked_for_is_said_as_such() -> None:
    assert RetryWait(2, 4, 20.0, True).describe() == "the provider asked to wait 20 s; retry 2 of 4"
    assert RetryWait(1, 4, 2.5, True).describe() == "the provider asked to wait 2.5 s; retry 1 of 4"
    with pytest.raises(ValueError):
        RetryWait(5, 4, 1.0, False)
