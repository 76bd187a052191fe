"""A scripted model: answers come from a file, in order.

It drives the offline demo and tests through the real stack. A script is a
TOML or JSON file with a list of responses; each has optional `text` and
optional `tool_calls` (`name` and `arguments`, an object, or `arguments_raw`,
a string sent verbatim so malformed JSON can be rehearsed):

    [[responses]]
    text = "Let me look at the clock."
    [[responses.tool_calls]]
    name = "get_current_time"
    arguments = { timezone = "Europe/Madrid" }

Text is streamed word by word, with an optional delay per piece, so
cancellation and streaming display behave as with a real endpoint.
"""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .base import (
    Finish,
    ModelRequest,
    ProviderError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ..memory.tokens import estimate_tokens

EXHAUSTED = "(The scripted model has no more responses.)"


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    name: str
    arguments: str  # raw JSON text


@dataclass(frozen=True, slots=True)
class ScriptedResponse:
    text: str = ""
    tool_calls: tuple[ScriptedCall, ...] = ()


def call(name: str, _raw: str | None = None, **arguments: object) -> ScriptedCall:
    """A scripted tool call; pass `_raw` to send arguments verbatim."""
    return ScriptedCall(name, _raw if _raw is not None else json.dumps(arguments))


def say(text: str = "", *calls: ScriptedCall) -> ScriptedResponse:
    """A scripted response with text and tool calls."""
    return ScriptedResponse(text, tuple(calls))


@dataclass
class ScriptedProvider:
    """A Provider whose answers are read from a script, one per request."""

    responses: list[ScriptedResponse]
    token_delay_s: float = 0.0
    name: str = "scripted"
    model: str = "script"
    context_window: int = 32_768
    requests: list[ModelRequest] = field(default_factory=list)
    position: int = 0

    @classmethod
    def from_file(cls, path: Path | str, *, token_delay_s: float = 0.0) -> ScriptedProvider:
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
            data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw)
        except (OSError, ValueError) as exc:
            raise ProviderError(f"cannot read the model script {path}: {exc}") from exc
        return cls(parse_script(data, path), token_delay_s=token_delay_s, model=path.stem)

    def extend(self, responses: Sequence[ScriptedResponse]) -> None:
        """Queue more responses (the demo scripts chapter by chapter)."""
        self.responses.extend(responses)

    @property
    def remaining(self) -> int:
        return len(self.responses) - self.position

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if self.position < len(self.responses):
            response = self.responses[self.position]
            self.position += 1
        else:
            response = ScriptedResponse(EXHAUSTED)
        # Even with no delay every piece passes through the event loop, as
        # bytes from a socket would: a cancellation can land between pieces.
        for piece in re.findall(r"\S+\s*|\s+", response.text):
            await asyncio.sleep(self.token_delay_s)
            yield TextDelta(piece)
        for index, scripted in enumerate(response.tool_calls):
            await asyncio.sleep(self.token_delay_s)
            half = len(scripted.arguments) // 2
            # Split the arguments the way real servers do, to exercise assembly.
            yield ToolCallDelta(index, f"call_{self.position}_{index}", scripted.name,
                                scripted.arguments[:half])
            yield ToolCallDelta(index, arguments=scripted.arguments[half:])
        prompt = sum(estimate_tokens(m.content) for m in request.messages)
        yield Usage(prompt, estimate_tokens(response.text) + 8 * len(response.tool_calls))
        yield Finish("tool_calls" if response.tool_calls else "stop")


def parse_script(data: object, origin: Path | str = "script") -> list[ScriptedResponse]:
    """Responses from a decoded script; errors name the entry at fault."""
    entries = data.get("responses") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ProviderError(f"{origin}: a script needs a list named 'responses'")
    responses = []
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise ProviderError(f"{origin}: response {n} must be a table/object")
        calls = []
        for m, spec in enumerate(entry.get("tool_calls", []), 1):
            if not isinstance(spec, dict) or "name" not in spec:
                raise ProviderError(f"{origin}: response {n}, tool call {m} needs a 'name'")
            raw = spec.get("arguments_raw")
            calls.append(
                ScriptedCall(spec["name"], raw if raw is not None else json.dumps(spec.get("arguments", {})))
            )
        responses.append(ScriptedResponse(str(entry.get("text", "")), tuple(calls)))
    return responses
