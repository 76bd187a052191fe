"""A fake Chat Completions server: POST /v1/chat/completions, streamed as SSE
`data:` chunks ending with `data: [DONE]`, or answered whole."""

from __future__ import annotations

import itertools
import time
from typing import Any

from ._server import DROP, FakeServer, sse
from .script import FakeFailure, FakeReply

_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
                404: "invalid_request_error", 429: "rate_limit_exceeded"}


class FakeOpenAIServer(FakeServer):
    """Speaks the OpenAI Chat Completions wire protocol on 127.0.0.1."""

    route = "/v1/chat/completions"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def render_failure(self, failure: FakeFailure) -> Any:
        return {"error": {
            "message": failure.message,
            "type": _ERROR_TYPES.get(failure.status, "server_error"),
            "param": None,
            "code": failure.code,
        }}

    def _call_ids(self, reply: FakeReply) -> list[str]:
        return [c.id or f"call_{next(self._ids)}" for c in reply.tool_calls]

    def _finish_reason(self, reply: FakeReply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def render_stream(self, reply: FakeReply, request: Any) -> list[bytes | object]:
        model = request.get("model", "fake")
        head = {"id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}

        def chunk(delta: dict, finish: str | None = None) -> bytes:
            return sse({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        events: list[bytes | object] = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": token}) for token in reply.tokens()]
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, self._call_ids(reply), strict=True)):
            events.append(chunk({"tool_calls": [{
                "index": index, "id": call_id, "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}))
            events += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in reply.pieces(call.arguments) if piece
            ]
        output = reply.output_tokens if reply.output_tokens is not None else len(events) - 1
        events.append(chunk({}, self._finish_reason(reply)))
        wants_usage = (request.get("stream_options") or {}).get("include_usage")
        if wants_usage and reply.send_usage:
            events.append(sse({**head, "choices": [], "usage": {
                "prompt_tokens": reply.input_tokens, "completion_tokens": output,
                "total_tokens": reply.input_tokens + output,
            }}))
        events.append(sse("[DONE]"))
        if reply.cut is None:
            return events
        cut = {
            "drop": DROP,
            "error": sse({"error": {"message": reply.error_message, "type": reply.error_type}}),
            "garbage": sse("{this is not json"),
        }[reply.cut]
        return events[: reply.cut_after] + [cut]

    def render_whole(self, reply: FakeReply, request: Any) -> Any:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for call, call_id in zip(reply.tool_calls, self._call_ids(reply), strict=True)
            ]
        output = reply.output_tokens if reply.output_tokens is not None else len(reply.tokens())
        return {
            "id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion",
            "created": int(time.time()), "model": request.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish_reason(reply)}],
            "usage": {"prompt_tokens": reply.input_tokens, "completion_tokens": output,
                      "total_tokens": reply.input_tokens + output},
        }
