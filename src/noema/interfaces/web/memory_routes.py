"""The memory inspector's pages."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .context import context_of, page, spoken_name
from .memory import observations, save_points, search
from .words import role_words
from .turns import turn_with_neighbours


async def memory_page(request: Request) -> Response:
    web = context_of(request)
    store = web.store
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
