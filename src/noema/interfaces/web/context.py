"""What every handler of the web page shares: the context, and the small
helpers for pages, JSON bodies and errors.

Every handler is `async`: the stores are read on the event loop's thread,
where the in-process agent writes them too.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.templating import Jinja2Templates

from ...memory.store import TurnStore
from ...paths import DEFAULT_AGENT, AgentPaths
from ...perception.archive import SensoryArchive
from ...security.settings import FilesSettings
from ..commands.memory import PersonSearch
from .auth import Credentials, Session
from .demo_run import DemoRun
from .live import Bridge


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
    archive: SensoryArchive | None = None
    first_run: str | None = None  # no model is configured: what to set
    demo: DemoRun | None = None  # `noema demo` for the first-run page
    # First run: starts the agent here once a model is saved; says what the person sees next.
    start_agent: Callable[[], Awaitable[str]] | None = None
    zone: ZoneInfo | None = None  # the person's time zone (None: the machine's)
    # The history search the agent itself uses (its own, or one built alike).
    search: Callable[[], PersonSearch] | None = None


class BadRequest(ValueError):
    """The page sent something the server cannot use; the text says what."""


def context_of(request: Request) -> WebContext:
    """The shared context of the app serving `request`."""
    return request.app.state.web


def session_of(request: Request) -> Session:
    """The browser session the request came with (the token guard let it through)."""
    return request.state.session


def spoken_name(agent: str) -> str:
    """How the page names the agent: the agent nobody named is Noema, not "default"."""
    return "Noema" if agent == DEFAULT_AGENT else agent


def page(request: Request, template: str, **values: Any) -> Response:
    """A page rendered from `template`, with the agent's name and the CSRF token."""
    web = context_of(request)
    return web.templates.TemplateResponse(
        request, template, {"agent": spoken_name(web.agent), "named": web.agent != DEFAULT_AGENT,
                            "csrf": session_of(request).csrf, **values},
        headers={"cache-control": "no-store"})


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, or BadRequest."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        raise BadRequest("the request body must be JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def text_field(body: dict[str, Any], key: str) -> str:
    """A required, non-blank text field of a JSON body, or BadRequest."""
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"say which {key}")
    return value.strip()


def error(status: int, text: str) -> JSONResponse:
    """A JSON error the page shows as it is."""
    return JSONResponse({"ok": False, "error": text}, status_code=status)
