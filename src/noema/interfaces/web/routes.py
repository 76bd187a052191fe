"""The pages and the JSON and live endpoints of the web page.

Every handler is `async`: the stores are read on the event loop's thread,
where the in-process agent writes them too.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ...memory.store import TurnStore
from ...paths import AgentPaths
from ...perception.archive import SensoryArchive
from ...security.settings import FilesSettings
from ..versions_cli import VersionsCommandError
from . import files as file_versions
from .auth import Credentials
from .live import AgentUnavailable, Bridge, event_frame
from .memory import ROLES, save_points, search
from .senses import SensesControl, rates, search_archive
from . import settings as settings_form
from ...config import ConfigError
from ...providers.base import ProviderError
from .turns import recent_turns, turn_with_neighbours

HERE = Path(__file__).parent
HISTORY_LIMIT = 200  # turns the chat page loads at most; older ones are in the memory page
RETRY_MS = 1000  # how soon a browser reconnects a dropped live stream
MAX_MESSAGE = 100_000  # characters in one message from the page


@dataclass
class WebContext:
    """What the handlers share: the agent link, the store, the secrets, the templates."""

    agent: str
    bridge: Bridge
    store: TurnStore
    credentials: Credentials
    templates: Jinja2Templates
    paths: AgentPaths
    files: FilesSettings
    senses: SensesControl | None = None  # silence and start: only with the agent in this process
    archive: SensoryArchive | None = None
    first_run: str | None = None  # no model is configured: what to set


class BadRequest(ValueError):
    """The page sent something the server cannot use; the text says what."""


def _context(request: Request) -> WebContext:
    return request.app.state.web


def _page(request: Request, template: str, **values: Any) -> Response:
    web = _context(request)
    return web.templates.TemplateResponse(
        request, template, {"agent": web.agent, "csrf": web.credentials.csrf, **values},
        headers={"cache-control": "no-store"})


async def chat_page(request: Request) -> Response:
    return _page(request, "chat.html", page="chat", first_run=_context(request).first_run)


async def memory_page(request: Request) -> Response:
    store = _context(request).store
    query = request.query_params.get("q", "").strip()
    roles = request.query_params.getlist("role")
    found, problem = None, None
    if query:
        try:
            found = search(store, query, roles)
        except ValueError as exc:
            problem = str(exc)
    return _page(request, "memory.html", page="memory", save_points=save_points(store),
                 query=query, roles=roles, all_roles=ROLES, found=found, problem=problem)


async def turn_page(request: Request) -> Response:
    turn_id = request.path_params["turn_id"]
    store = _context(request).store
    if store.get(turn_id) is None:
        return _page(request, "turn.html", page="memory", turn_id=turn_id, turns=[])
    return _page(request, "turn.html", page="memory", turn_id=turn_id,
                 turns=turn_with_neighbours(store, turn_id))


async def files_page(request: Request) -> Response:
    web = _context(request)
    try:
        found = await asyncio.to_thread(file_versions.workspaces, web.files, web.paths)
        problem = None
    except VersionsCommandError as exc:
        found, problem = [], str(exc)
    return _page(request, "files.html", page="files", workspaces=found, problem=problem)


async def diff_page(request: Request) -> Response:
    web = _context(request)
    version = request.query_params.get("version", "").strip()
    try:
        if not version:
            raise VersionsCommandError("say which version: /files/diff?version=ID")
        text, problem = await asyncio.to_thread(file_versions.diff, web.files, web.paths,
                                                version), None
    except VersionsCommandError as exc:
        text, problem = "", str(exc)
    lines = [(_diff_class(line), line) for line in text.splitlines()]
    return _page(request, "diff.html", page="files", version=version, lines=lines,
                 problem=problem)


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---", "diff ", "index ")):
        return "head"
    return {"+": "added", "-": "removed", "@": "hunk"}.get(line[:1], "")


async def restore_file(request: Request) -> Response:
    web = _context(request)
    try:
        body = await _json(request)
        folder, path, version = body.get("folder"), body.get("path"), body.get("version")
        if not all(isinstance(v, str) and v for v in (folder, path, version)):
            raise BadRequest("a restore needs the folder, the path and the version")
        text = await asyncio.to_thread(file_versions.restore, web.files, web.paths, folder,
                                       path, version)
    except BadRequest as exc:
        return _error(400, str(exc))
    except VersionsCommandError as exc:
        return _error(409, str(exc))
    return JSONResponse({"ok": True, "text": text})


async def undo_write(request: Request) -> Response:
    web = _context(request)
    try:
        text = await asyncio.to_thread(file_versions.undo, web.files, web.paths)
    except VersionsCommandError as exc:
        return _error(409, str(exc))
    return JSONResponse({"ok": True, "text": text})


async def senses_page(request: Request) -> Response:
    web = _context(request)
    try:
        status, unreachable = await web.bridge.status(), None
    except AgentUnavailable as exc:
        status, unreachable = None, f"the agent is not reachable: {exc}"
    plot = await asyncio.to_thread(rates, web.paths.archive_db, web.paths.turns_db)
    query = request.query_params.get("q", "").strip()
    channel = request.query_params.get("channel", "").strip()
    found, problem = None, None
    if query:
        if web.archive is None:
            problem = "the archive cannot be searched: the agent has none yet"
        else:
            try:
                found = search_archive(web.archive, query, channel or None)
            except ValueError as exc:
                problem = str(exc)
    return _page(request, "senses.html", page="senses", status=status, unreachable=unreachable,
                 plot=plot, control=web.senses is not None, query=query, channel=channel,
                 found=found, problem=problem)


async def batch_page(request: Request) -> Response:
    """One archived batch, a page of events at a time: where a delivered gap points."""
    web = _context(request)
    batch_id = request.path_params["batch_id"]
    try:
        offset = max(int(request.query_params.get("offset", 0)), 0)
    except ValueError:
        offset = 0
    page, problem = None, None
    if web.archive is None:
        problem = "the agent has no archive yet"
    else:
        try:
            page = web.archive.lookup(batch_id, offset, limit=100)
        except (LookupError, ValueError) as exc:
            problem = str(exc) or f"there is no batch {batch_id}"
    events = [] if page is None else [
        {"seq": e.batch_seq, "when": time.strftime("%Y-%m-%d %H:%M:%S",
                                                   time.localtime(e.received_at)),
         "sender": e.sender, "text": e.text} for e in page.events]
    return _page(request, "batch.html", page="senses", batch_id=batch_id, batch=page and page.batch,
                 events=events, next_offset=page and page.next_offset, problem=problem)


async def silence(request: Request) -> Response:
    return await _sense_action(request, lambda control, body: control.silence(
        _text(body, "channel"), _text(body, "duration")))


async def start_sense(request: Request) -> Response:
    return await _sense_action(request, lambda control, body: control.start(
        _text(body, "channel")))


async def _sense_action(request: Request, act) -> Response:
    control = _context(request).senses
    if control is None:
        return _error(409, "silence and start from this page need the agent to run in this "
                           "process; `noema run`'s agent takes them from the model's tools")
    try:
        text = act(control, await _json(request))
    except (BadRequest, ValueError) as exc:
        return _error(400, str(exc))
    return JSONResponse({"ok": True, "text": text})


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"say which {key}")
    return value.strip()


async def settings_page(request: Request) -> Response:
    web = _context(request)
    try:
        sections, problem = settings_form.form(settings_form.current(web.paths)), None
    except ConfigError as exc:
        sections, problem = [], str(exc)
    return _page(request, "settings.html", page="settings", sections=sections, problem=problem,
                 config_file=str(web.paths.config_file))


async def save_setting(request: Request) -> Response:
    web = _context(request)
    try:
        body = await _json(request)
        key, value = _text(body, "key"), body.get("value")
        if not isinstance(value, str):
            raise BadRequest("the value must be text, as `noema config set` takes it")
        await asyncio.to_thread(settings_form.save, web.paths, key, value)
    except BadRequest as exc:
        return _error(400, str(exc))
    except ConfigError as exc:
        return _error(400, str(exc))
    return JSONResponse({"ok": True, "text": f"{key} saved in {web.paths.config_file}; the "
                                             "agent uses it from its next start."})


async def rule_test(request: Request) -> Response:
    web = _context(request)
    try:
        body = await _json(request)
        fields = {name: body.get(name, "") for name in ("channel", "sender", "key", "text")}
        if not all(isinstance(v, str) for v in fields.values()):
            raise BadRequest("the event's fields are text")
        text = settings_form.which_rule(web.paths, authorised=body.get("authorised") is True,
                                        **fields)
    except BadRequest as exc:
        return _error(400, str(exc))
    except (ConfigError, ValueError, TypeError) as exc:
        return _error(400, f"that event cannot be tested: {exc}")
    return JSONResponse({"ok": True, "text": text})


async def test_model(request: Request) -> Response:
    web = _context(request)
    try:
        role = _text(await _json(request), "role")
        if role not in ("reasoning", "chronicler"):
            raise BadRequest("role is reasoning or chronicler")
        text = await settings_form.test_connection(web.paths, role)  # type: ignore[arg-type]
    except BadRequest as exc:
        return _error(400, str(exc))
    except (ConfigError, ProviderError) as exc:
        return _error(409, f"the test failed: {exc}")
    return JSONResponse({"ok": True, "text": text})


async def history(request: Request) -> Response:
    try:
        limit = min(max(int(request.query_params.get("limit", HISTORY_LIMIT)), 1), HISTORY_LIMIT)
        after = max(int(request.query_params.get("after", 0)), 0)
    except ValueError:
        return _error(400, "limit and after must be whole numbers")
    return JSONResponse({"turns": recent_turns(_context(request).store, limit, after)})


async def turn(request: Request) -> Response:
    turn_id = request.path_params["turn_id"]
    store = _context(request).store
    if store.get(turn_id) is None:
        return _error(404, f"there is no turn {turn_id}")
    return JSONResponse({"id": turn_id, "turns": turn_with_neighbours(store, turn_id)})


async def status(request: Request) -> Response:
    try:
        view = await _context(request).bridge.status()
    except AgentUnavailable as exc:
        return _error(503, f"the agent is not reachable: {exc}")
    return JSONResponse(view.model_dump(mode="json"))


async def say(request: Request) -> Response:
    try:
        text = (await _json(request)).get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest("write a message first")
        if len(text) > MAX_MESSAGE:
            raise BadRequest(f"a message holds at most {MAX_MESSAGE:,} characters")
    except BadRequest as exc:
        return _error(400, str(exc))
    try:
        done = await _context(request).bridge.say(text)
    except AgentUnavailable as exc:
        return _error(503, f"your message was not sent: {exc}")
    return JSONResponse({"ok": done.ok, "error": done.error, "turn_id": done.turn_id},
                        status_code=200 if done.ok else 409)


async def stop(request: Request) -> Response:
    try:
        done = await _context(request).bridge.stop()
    except AgentUnavailable as exc:
        return _error(503, f"could not reach the agent: {exc}")
    return JSONResponse({"ok": done.ok, "error": done.error})


async def answer(request: Request) -> Response:
    try:
        body = await _json(request)
        approval, allow = body.get("approval"), body.get("allow")
        if not isinstance(approval, int) or not isinstance(allow, bool):
            raise BadRequest("an answer needs an approval number and allow true or false")
    except BadRequest as exc:
        return _error(400, str(exc))
    try:
        await _context(request).bridge.answer(approval, allow)
    except AgentUnavailable as exc:
        return _error(503, f"your answer was not sent: {exc}")
    return JSONResponse({"ok": True})


async def live(request: Request) -> Response:
    """The agent's messages as server-sent events, resumable by Last-Event-ID."""
    raw = request.headers.get("last-event-id") or request.query_params.get("since")
    try:
        since = int(raw) if raw not in (None, "") else None
    except ValueError:
        return _error(400, "Last-Event-ID must be a protocol seq (a whole number)")
    stream = _context(request).bridge.stream(since)
    try:  # reach the agent before answering 200, so a page learns it is not there
        first = await anext(stream)
    except (AgentUnavailable, StopAsyncIteration) as exc:
        return _error(503, f"the agent is not reachable: {exc or 'it closed the connection'}")

    async def frames():
        try:
            yield f"retry: {RETRY_MS}\n\n"
            yield event_frame(first)
            async for message in stream:
                yield event_frame(message)
        finally:
            await stream.aclose()

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except ValueError:
        raise BadRequest("the request body must be JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _error(status: int, text: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": text}, status_code=status)


def routes() -> list:
    """Every route of the web page."""
    return [
        Route("/", chat_page),
        Route("/memory", memory_page),
        Route("/memory/turn/{turn_id:int}", turn_page),
        Route("/files", files_page),
        Route("/files/diff", diff_page),
        Route("/api/files/restore", restore_file, methods=["POST"]),
        Route("/api/files/undo", undo_write, methods=["POST"]),
        Route("/senses", senses_page),
        Route("/senses/batch/{batch_id}", batch_page),
        Route("/api/senses/silence", silence, methods=["POST"]),
        Route("/api/senses/start", start_sense, methods=["POST"]),
        Route("/settings", settings_page),
        Route("/api/settings", save_setting, methods=["POST"]),
        Route("/api/settings/test", test_model, methods=["POST"]),
        Route("/api/settings/rule", rule_test, methods=["POST"]),
        Route("/api/history", history),
        Route("/api/turn/{turn_id:int}", turn),
        Route("/api/status", status),
        Route("/api/say", say, methods=["POST"]),
        Route("/api/stop", stop, methods=["POST"]),
        Route("/api/answer", answer, methods=["POST"]),
        Route("/live", live),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
