"""The chat: the page, the stored history, requests to the agent, the live stream."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ...paths import AgentPaths
from ...security.policy import Access, AccessDenied, AccessPolicy
from ...security.settings import FilesSettings
from . import first_run
from .approval_view import Reader
from .context import BadRequest, context_of, error, json_body, page, session_of, spoken_name
from .history import history_page
from .live import AgentUnavailable, event_frame
from .streaming import StreamedAnswer
from .turns import turn_with_neighbours

# The chat opens on its newest turns only, and reads older ones a page at a
# time as the person scrolls up (or follows a link to one): a page that opened
# on the whole history would lay out thousands of bubbles nobody sees.
HISTORY_PAGE = 50  # turns in the page as it opens, and in each page read after
HISTORY_LIMIT = 200  # turns one request reads at most
STATUS_WAIT_S = 0.5  # the page waits no longer for the agent's status; it asks again later
RETRY_MS = 1000  # how soon a browser reconnects a dropped live stream
MAX_MESSAGE = 100_000  # characters in one message from the page


async def chat_page(request: Request) -> Response:
    web = context_of(request)
    if web.first_run:  # no agent yet: the page is the setup form
        setup = first_run.choices(web.paths)
        return page(request, "chat.html", page="chat", first_run=web.first_run, setup=setup,
                    setup_json={c.name: c.json() for c in setup})
    # The newest page and the agent's status come inside the page itself (as
    # JSON data, not markup): the first paint waits for no second request.
    first = history_page(web.store, HISTORY_PAGE)
    try:
        status = await asyncio.wait_for(web.bridge.status(), STATUS_WAIT_S)
        view = status.model_dump(mode="json")
    except (AgentUnavailable, TimeoutError):
        view = None  # the page asks again itself, and says so if the agent is not there
    return page(request, "chat.html", page="chat", history=first.json(), status=view)


async def history(request: Request) -> Response:
    """Stored turns: the newest (or with `oldest=1` the oldest) `limit` with
    `after` < id < `before`."""
    query = request.query_params
    try:
        limit = min(max(int(query.get("limit", HISTORY_LIMIT)), 1), HISTORY_LIMIT)
        after = max(int(query.get("after", 0)), 0)
        before = int(query["before"]) if query.get("before") else None
    except ValueError:
        return error(400, "limit, after and before must be whole numbers")
    if query.get("oldest", "0") not in ("0", "1"):
        return error(400, "oldest is 1 (the oldest turns of the range) or 0 (the newest)")
    found = history_page(context_of(request).store, limit, after=after, before=before,
                         oldest=query.get("oldest") == "1")
    return JSONResponse(found.json())


async def turn(request: Request) -> Response:
    turn_id = request.path_params["turn_id"]
    store = context_of(request).store
    if store.get(turn_id) is None:
        return error(404, f"there is no turn {turn_id}")
    agent = spoken_name(context_of(request).agent)
    return JSONResponse({"id": turn_id, "turns": turn_with_neighbours(store, turn_id,
                                                                     agent=agent)})


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
        done = await context_of(request).bridge.answer(approval, allow)
    except AgentUnavailable as exc:
        return error(503, f"your answer was not sent: {exc}")
    if not done.ok:  # the answer names a question that is not open: it settles nothing
        return error(409, f"your answer was not used: {done.error}")
    return JSONResponse({"ok": True})


FILE_SHOWN_BYTES = 1 << 20  # a larger file is not read for an approval's diff


def file_reader(files: FilesSettings, paths: AgentPaths) -> Reader:
    """A file's text as it is now, for an approval's diff: only where the file
    tools may read it (the same policy, so no denied name is ever shown), None
    for a file that is not there, too large, or not text."""
    policy = AccessPolicy.from_settings(files, paths)

    def read(raw: str) -> str | None:
        try:
            target = policy.check(raw, Access.READ)
            if not target.path.is_file() or target.path.stat().st_size > FILE_SHOWN_BYTES:
                return None
            return target.path.read_bytes().decode("utf-8")
        except (AccessDenied, OSError, ValueError):
            return None

    return read


async def live(request: Request) -> Response:
    """The agent's messages as server-sent events, resumable by Last-Event-ID."""
    raw = request.headers.get("last-event-id") or request.query_params.get("since")
    try:
        since = int(raw) if raw not in (None, "") else None
    except ValueError:
        return error(400, "Last-Event-ID must be a protocol seq (a whole number)")
    web = context_of(request)
    stream = web.bridge.stream(since)
    current = file_reader(web.files, web.paths)
    try:  # reach the agent before answering 200, so a page learns it is not there
        first = await anext(stream)
    except (AgentUnavailable, StopAsyncIteration) as exc:
        return error(503, f"the agent is not reachable: {exc or 'it closed the connection'}")

    sessions, session = context_of(request).credentials.sessions, session_of(request)

    async def frames():
        answer = StreamedAnswer()
        try:
            yield f"retry: {RETRY_MS}\n\n"
            yield event_frame(first, answer, current)
            async for message in stream:
                if not sessions.is_open(session):  # ended meanwhile: nothing more reaches it
                    return
                yield event_frame(message, answer, current)
        finally:
            await stream.aclose()

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})
