"""The user guide's pages: /guide for its home, /guide/NAME for the others."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .context import page
from .guide import HOME, NoSuchPage, contents, guide_page


async def guide(request: Request) -> Response:
    name = request.path_params.get("name") or HOME
    try:
        shown = guide_page(name)
    except NoSuchPage:
        response = page(request, "guide.html", page="guide", shown=None, name=name,
                        contents=contents())
        response.status_code = 404
        return response
    return page(request, "guide.html", page="guide", shown=shown, name=name,
                contents=contents())
