"""The chat: the page, the stored history, requests to the agent, the live stream."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .context import BadRequest, context_of, error, json_body, page
from .live import AgentUnavailable, event_frame
from .streaming import StreamedAnswer
from .turns import recent_turns, turn_with_neighbours

HISTORY_LIMIT = 200  # turns the chat page loads at most; older ones are in the memory page
RETRY_MS = 1000  # how soon a browser reconnects a dropped live stream
MAX_MESSAGE = 100_000  # characters in one message from the page


async def chat_page(request: Request) -> Response:
    return page(request, "chat.html", page="chat", first_run=context_of(request).first_run)


async def history(request: Request) -> Response:
    try:
        limit = min(max(int(request.query_params.get("limit", HISTORY_LIMIT)), 1), HISTORY_LIMIT)
        after = max(int(request.query_params.get("after", 0)), 0)
    except ValueError:
        return error(400, "limit and after must be whole numbers")
    return JSONResponse({"turns": recent_turns(context_of(request).store, limit, after)})


async def turn(request: Request) -> Response:
    turn_id = request.path_params["turn_id"]
    store = context_of(request).store
    if store.get(turn_id) is None:
        return error(404, f"there is no turn {turn_id}")
    return JSONResponse({"id": turn_id, "turns": turn_with_neighbours(store, turn_id)})


async def status(request: Request) -> Response:
    try:
        view = await context_of(request).bridge.status()
    except AgentUnavailable as exc:
        return error(503, f"the agent is not reachable: {exc}")
    return JSONResponse(view.model_dump(mode="json"))


async def say(request: Request) -> Response:
    try:
        text = (await json_body(request)).get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest("write a message first")
        if len(text) > MAX_MESSAGE:
            raise BadRequest(f"a message holds at most {MAX_MESSAGE:,} characters")
    except BadRequest as exc:
        return error(400, str(exc))
    try:
        done = await context_of(request).bridge.say(text)
    except AgentUnavailable as exc:
        return error(503, f"your message was not sent: {exc}")
    return JSONResponse({"ok": done.ok, "error": done.error, "turn_id": done.turn_id},
                        status_code=200 if done.ok else 409)


async def stop(request: Request) -> Response:
    try:
        done = await context_of(request).bridge.stop()
    except AgentUnavailable as exc:
        return error(503, f"could not reach the agent: {exc}")
    return JSONResponse({"ok": done.ok, "error": done.error})


async def answer(request: Request) -> Response:
    try:
        body = await json_body(request)
        approval, allow = body.get("approval"), body.get("allow")
        if not isinstance(approval, int) or not isinstance(allow, bool):
            raise BadRequest("an answer needs an approval number and allow true or false")
    except BadRequest as exc:
        return error(400, str(exc))
    try:
        await context_of(request).bridge.answer(approval, allow)
    except AgentUnavailable as exc:
        return error(503, f"your answer was not sent: {exc}")
    return JSONResponse({"ok": True})


async def live(request: Request) -> Response:
    """The agent's messages as server-sent events, resumable by Last-Event-ID."""
    raw = request.headers.get("last-event-id") or request.query_params.get("since")
    try:
        since = int(raw) if raw not in (None, "") else None
    except ValueError:
        return error(400, "Last-Event-ID must be a protocol seq (a whole number)")
    stream = context_of(request).bridge.stream(since)
    try:  # reach the agent before answering 200, so a page learns it is not there
        first = await anext(stream)
    except (AgentUnavailable, StopAsyncIteration) as exc:
        return error(503, f"the agent is not reachable: {exc or 'it closed the connection'}")

    async def frames():
        answer = StreamedAnswer()
        try:
            yield f"retry: {RETRY_MS}\n\n"
            yield event_frame(first, answer)
            async for message in stream:
                yield event_frame(message, answer)
        finally:
            await stream.aclose()

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})
