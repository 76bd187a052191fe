"""A fake Anthropic Messages server: POST /v1/messages, streamed as SSE with
`event:` and `data:` lines (message_start, content_block_start/delta/stop,
message_delta, message_stop), or answered whole."""

from __future__ import annotations

import itertools
import json
from typing import Any

from ._server import DROP, FakeServer, sse
from .script import FakeFailure, FakeReply

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                529: "overloaded_error"}
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


class FakeAnthropicServer(FakeServer):
    """Speaks the Anthropic Messages wire protocol on 127.0.0.1."""

    route = "/v1/messages"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ids = itertools.count(1)

    def render_failure(self, failure: FakeFailure) -> Any:
        kind = failure.code or _ERROR_TYPES.get(failure.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": failure.message}}

    def _stop_reason(self, reply: FakeReply) -> str:
        if reply.finish_reason:
            return _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)
        return "tool_use" if reply.tool_calls else "end_turn"

    def _message(self, request: Any, content: list, stop: str | None, output: int) -> dict:
        return {
            "id": f"msg_{next(self._ids)}", "type": "message", "role": "assistant",
            "model": request.get("model", "fake") if isinstance(request, dict) else "fake",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": output},
        }

    def render_stream(self, reply: FakeReply, request: Any) -> list[bytes | object]:
        start = self._message(request, [], None, 1)
        start["usage"]["input_tokens"] = reply.input_tokens
        events: list[bytes | object] = [sse({"type": "message_start", "message": start}, "message_start")]
        block = 0
        if reply.text:
            events.append(sse({"type": "content_block_start", "index": block,
                               "content_block": {"type": "text", "text": ""}}, "content_block_start"))
            events.append(sse({"type": "ping"}, "ping"))
            events += [
                sse({"type": "content_block_delta", "index": block,
                     "delta": {"type": "text_delta", "text": token}}, "content_block_delta")
                for token in reply.tokens()
            ]
            events.append(sse({"type": "content_block_stop", "index": block}, "content_block_stop"))
            block += 1
        for call in reply.tool_calls:
            events.append(sse({"type": "content_block_start", "index": block, "content_block": {
                "type": "tool_use", "id": call.id or f"toolu_{next(self._ids)}",
                "name": call.name, "input": {},
            }}, "content_block_start"))
            events += [
                sse({"type": "content_block_delta", "index": block,
                     "delta": {"type": "input_json_delta", "partial_json": piece}}, "content_block_delta")
                for piece in reply.pieces(call.arguments)
            ]
            events.append(sse({"type": "content_block_stop", "index": block}, "content_block_stop"))
            block += 1
        output = reply.output_tokens if reply.output_tokens is not None else len(events)
        events.append(sse({
            "type": "message_delta",
            "delta": {"stop_reason": self._stop_reason(reply), "stop_sequence": None},
            "usage": {"output_tokens": output},
        }, "message_delta"))
        events.append(sse({"type": "message_stop"}, "message_stop"))
        if reply.cut is None:
            return events
        cut = {
            "drop": DROP,
            "error": sse({"type": "error", "error": {"type": reply.error_type,
                                                     "message": reply.error_message}}, "error"),
            "garbage": sse("{this is not json", "content_block_delta"),
        }[reply.cut]
        return events[: reply.cut_after] + [cut]

    def render_whole(self, reply: FakeReply, request: Any) -> Any:
        content: list[dict] = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [
            {"type": "tool_use", "id": call.id or f"toolu_{next(self._ids)}", "name": call.name,
             "input": json.loads(call.arguments or "{}")}
            for call in reply.tool_calls
        ]
        output = reply.output_tokens if reply.output_tokens is not None else len(reply.tokens())
        message = self._message(request, content, self._stop_reason(reply), output)
        message["usage"]["input_tokens"] = reply.input_tokens
        return message
