"""The memory inspector's pages."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from .chat_routes import STATUS_WAIT_S
from .context import context_of, page, spoken_name
from .live import AgentUnavailable
from .memory import observations, save_points, search
from .words import role_words
from .turns import turn_with_neighbours


async def memory_page(request: Request) -> Response:
    web = context_of(request)
    store = web.store
    # What compaction is doing now (or why it last failed), from the agent itself.
    try:
        status = await asyncio.wait_for(web.bridge.status(), STATUS_WAIT_S)
        writing, in_context, reached = status.memory, status.save_point_id, True
    except (AgentUnavailable, TimeoutError):
        writing, in_context, reached = "", None, False
    query = request.query_params.get("q", "").strip()
    roles = request.query_params.getlist("role")
    found, problem = None, None
    agent = spoken_name(web.agent)
    if query and web.search is not None:
        try:
            found = search(web.search(), query, roles, agent)
        except ValueError as exc:
            problem = str(exc)
    return page(request, "memory.html", page="memory", save_points=save_points(store),
                writing=writing, in_context=in_context, reached=reached,
                pinned=observations(store), query=query, roles=roles,
                all_roles=role_words(agent), found=found, problem=problem)


async def turn_page(request: Request) -> Response:
    turn_id = request.path_params["turn_id"]
    store = context_of(request).store
    if store.get(turn_id) is None:
        return page(request, "turn.html", page="memory", turn_id=turn_id, turns=[])
    turns = turn_with_neighbours(store, turn_id, agent=spoken_name(context_of(request).agent))
    return page(request, "turn.html", page="memory", turn_id=turn_id,
                cited=next(t for t in turns if t["id"] == turn_id),
                around=[t for t in turns if t["id"] != turn_id], turns=turns)
