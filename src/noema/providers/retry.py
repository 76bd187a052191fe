"""Our one retry policy for model calls (the SDKs' own retries are switched off).

A stream is retried only while nothing of it has been passed on: once the
first event is out, a failure ends the stream, because replaying a
half-streamed answer would show the person (and the orchestrator) part of
it twice. Before each wait the stream yields a `RetryWait`, which is not
model output: whoever shows the stream can say why nothing arrives yet, and
cancelling the stream during the wait stops it at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

from .base import ProviderError, RetryWait, StreamEvent
from .endpoint import Endpoint
from .failures import Failure, provider_error, summary

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Describe = Callable[[BaseException], Failure | None]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to try again.

    Waits grow exponentially with full jitter (a random wait between zero and
    the exponential bound), so clients that failed together do not retry
    together. A server's Retry-After is honoured, up to `max_retry_after_s`.
    """

    max_retries: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_retry_after_s: float = 60.0
    sleep: Sleep = asyncio.sleep  # injectable so tests never wait
    jitter: Callable[[], float] = random.random  # in [0, 1)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries cannot be negative")
        if self.base_delay_s < 0 or self.max_delay_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("retry delays cannot be negative")

    def delay(self, retry: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (0 for the first retry)."""
        if retry_after_s is not None:
            return min(retry_after_s, self.max_retry_after_s)
        bound = min(self.max_delay_s, self.base_delay_s * 2**retry)
        return self.jitter() * bound


async def stream_with_retry(
    attempt: Callable[[], AsyncGenerator[StreamEvent, None]],
    *,
    endpoint: Endpoint,
    policy: RetryPolicy,
    describe: Describe,
) -> AsyncGenerator[StreamEvent, None]:
    """Run `attempt()` and pass its events on, retrying under `policy`.

    `attempt` must return an async generator that closes its HTTP response in
    a `finally`; closing or cancelling this generator closes it at once.
    Failures become `ProviderError`s; anything `describe` does not recognise
    is a bug and propagates unchanged.
    """
    retries = 0
    while True:
        events = attempt()
        started = False
        try:
            async for event in events:
                started = True
                yield event
            return
        except ProviderError:
            raise
        except Exception as exc:
            failure = describe(exc)
            if failure is None:
                raise
            if started or not failure.retryable or retries >= policy.max_retries:
                raise provider_error(
                    failure, endpoint, attempts=retries + 1, mid_stream=started
                ) from exc
            wait = policy.delay(retries, failure.retry_after_s)
            retries += 1
            notice = RetryWait(retries, policy.max_retries, wait,
                               asked=failure.retry_after_s is not None,
                               why=summary(failure, endpoint))
            # The person is told through the stream; the log keeps where and why.
            log.info("%s: %s; retry %d of %d in %.1f s", endpoint.where, notice.why,
                     retries, policy.max_retries, wait)
        finally:
            await events.aclose()
        yield notice
        await policy.sleep(wait)
