"""The senses page, archive batches, silence and start, the urgency-rule tester."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...config import ConfigError
from .context import BadRequest, context_of, error, json_body, page, text_field
from .live import AgentUnavailable
from . import senses
from .senses import SenseRefused, nature_words, rates, search_archive, urgency_words


async def senses_page(request: Request) -> Response:
    web = context_of(request)
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
    return page(request, "senses.html", page="senses", status=status,
                unreachable=unreachable, plot=plot, control=status is not None,
                query=query, channel=channel, found=found, problem=problem,
                nature_words=nature_words, urgency_words=urgency_words)


async def batch_page(request: Request) -> Response:
    """One archived batch, a page of events at a time: where a delivered gap points."""
    web = context_of(request)
    batch_id = request.path_params["batch_id"]
    try:
        offset = max(int(request.query_params.get("offset", 0)), 0)
    except ValueError:
        offset = 0
    found, problem = None, None
    if web.archive is None:
        problem = "the agent has no archive yet"
    else:
        try:
            found = web.archive.lookup(batch_id, offset, limit=100)
        except (LookupError, ValueError) as exc:
            problem = str(exc) or f"there is no batch {batch_id}"
    events = [] if found is None else [
        {"seq": e.batch_seq, "when": e.received_at,
         "sender": e.sender, "text": e.text} for e in found.events]
    return page(request, "batch.html", page="senses", batch_id=batch_id,
                batch=found and found.batch, events=events,
                next_offset=found and found.next_offset, problem=problem)


async def silence(request: Request) -> Response:
    zone = context_of(request).zone
    return await _sense_action(request, lambda bridge, body: senses.silence(
        bridge, text_field(body, "channel"), text_field(body, "duration"), zone))


async def start_sense(request: Request) -> Response:
    return await _sense_action(request, lambda bridge, body: senses.start(
        bridge, text_field(body, "channel")))


async def _sense_action(request: Request, act) -> Response:
    try:
        text = await act(context_of(request).bridge, await json_body(request))
    except (BadRequest, SenseRefused, ValueError) as exc:
        return error(400, str(exc))
    except AgentUnavailable as exc:
        return error(503, f"could not reach the agent: {exc}")
    return JSONResponse({"ok": True, "text": text})


async def rule_test(request: Request) -> Response:
    """Which urgency rule an event the person describes would meet."""
    web = context_of(request)
    try:
        body = await json_body(request)
        fields = {name: body.get(name, "") for name in ("channel", "sender", "key", "text")}
        if not all(isinstance(v, str) for v in fields.values()):
            raise BadRequest("the event's fields are text")
        text = await asyncio.to_thread(senses.which_rule, web.paths,
                                       authorised=body.get("authorised") is True, **fields)
    except BadRequest as exc:
        return error(400, str(exc))
    except (ConfigError, ValueError, TypeError) as exc:
        return error(400, f"that event cannot be tested: {exc}")
    return JSONResponse({"ok": True, "text": text})
