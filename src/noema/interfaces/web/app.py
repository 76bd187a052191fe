"""The web page's ASGI application.

Starlette: a small, well-kept ASGI toolkit (routing, static files, streaming
responses, Jinja2 templates) with no framework around it, so the security
layers are plain middleware we can read whole: trusted hosts, the access
token with CSRF, and the security headers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.templating import Jinja2Templates

from ...memory.store import TurnStore
from ...paths import AgentPaths
from ...perception.archive import SensoryArchive
from ...security.settings import FilesSettings
from ..commands.memory import PersonSearch
from .auth import Credentials, TokenGuard
from .headers import SecurityHeaders
from .demo_run import DemoRun
from .live import Bridge
from . import dates, words
from .context import WebContext
from .routes import HERE, routes


def build_web_app(*, paths: AgentPaths, files: FilesSettings, bridge: Bridge, store: TurnStore,
                  credentials: Credentials,
                  archive: SensoryArchive | None = None, first_run: str | None = None,
                  demo: DemoRun | None = None,
                  start_agent: Callable[[], Awaitable[str]] | None = None,
                  timezone: str | None = None,
                  search: Callable[[], PersonSearch] | None = None,
                  hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> Starlette:
    """The web page for one agent, reached through `bridge`, its history read from
    `store`, its file versions from the workspaces `files` names; its times
    written in the person's `timezone` (None: the machine's)."""
    environment = Environment(loader=FileSystemLoader(HERE / "templates"),
                              autoescape=select_autoescape(default=True))
    zone = dates.zone_named(timezone)
    environment.filters["when"] = lambda ts: dates.when_html(ts, zone)
    environment.filters["summary"] = words.summary_words
    environment.globals["zone_name"] = timezone if zone is not None else ""
    templates = Jinja2Templates(env=environment)
    app = Starlette(routes=routes(), middleware=[
        Middleware(SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts)),
        Middleware(TokenGuard, credentials=credentials),
    ])
    app.state.web = WebContext(paths.name, bridge, store, credentials, templates, paths, files,
                               archive, first_run, demo, start_agent, zone, search)
    return app
