"""The memory inspector's pages."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .context import context_of, page
from .memory import ROLES, observations, save_points, search
from .turns import turn_with_neighbours


async def memory_page(request: Request) -> Response:
    store = context_of(request).store
    query = request.query_params.get("q", "").strip()
    roles = request.query_params.getlist("role")
    found, problem = None, None
    if query:
        try:
            found = search(store, query, roles)
        except ValueError as exc:
            problem = str(exc)
    return page(request, "memory.html", page="memory", save_points=save_points(store),
                pinned=observations(store),
                query=query, roles=roles, all_roles=ROLES, found=found, problem=problem)


async def turn_page(request: Request) -> Response:
    turn_id = request.path_params["turn_id"]
    store = context_of(request).store
    if store.get(turn_id) is None:
        return page(request, "turn.html", page="memory", turn_id=turn_id, turns=[])
    return page(request, "turn.html", page="memory", turn_id=turn_id,
                turns=turn_with_neighbours(store, turn_id))
