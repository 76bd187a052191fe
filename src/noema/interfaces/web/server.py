"""`noema ui`: the web page's server, attached to the agent.

When `noema run` (or another process) already runs the agent, the server
attaches to it over the agent's socket, as `noema chat` does, and reads the
history from the turn store beside it. Otherwise it runs the agent itself,
in this process, behind a `Host`, and offers the same socket to other
interfaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from ...config import Config, load_config
from ...memory.store import TurnStore
from ...paths import AgentPaths
from ...perception.archive import SensoryArchive
from ..host.attach import connect_socket, reachable, socket_path
from ..host.host import Host
from ..commands.memory import PersonSearch, person_search
from .app import build_web_app
from .dates import zone_named
from .auth import Credentials, keep_token
from .demo_run import DemoRun
from .live import AgentUnavailable, Bridge

log = logging.getLogger(__name__)

DEFAULT_PORT = 8731


class PublicAddress(ValueError):
    """The server was asked to listen where other machines can reach it."""


def check_address(host: str, *, allow_remote: bool) -> None:
    """Refuse an address other machines can reach unless the person allowed it."""
    if allow_remote or host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise PublicAddress(f"{host!r} is not an IP address; use 127.0.0.1 (the default)") from None
    if not loopback:
        raise PublicAddress(
            f"{host} can be reached from other machines, and the page can run commands on "
            "this one. Use 127.0.0.1 (the default), or pass --allow-remote if you mean it "
            "(the access token is then the only lock; put TLS in front).")


@dataclass
class UiServer:
    """The web page for one agent, served on one address until `stop`."""

    paths: AgentPaths
    config: Config
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    allow_remote: bool = False
    build_app: Callable[..., object] | None = None  # `app.build_app`, replaceable in tests
    credentials: Credentials | None = None  # drawn at start unless given
    mode: str = ""  # "attached", "in-process" or "first-run" (no model), once started
    first_run: str | None = None  # why no agent runs: no model is configured
    agent_app: object | None = None  # the in-process App
    _agent_host: Host | None = None
    _store: TurnStore | None = None
    _archive: SensoryArchive | None = None
    _bridge: Bridge | None = None
    _demo: DemoRun | None = None  # first run: the offline demo the page can start
    _server: uvicorn.Server | None = None
    _web: object | None = None  # the page's ASGI app, whose context a first run updates
    _task: asyncio.Task | None = None
    _address: tuple[str, int] | None = None
    _search: PersonSearch | None = None  # attached or first run: built as the agent's

    def _person_search(self) -> PersonSearch:
        """The history search the page uses: the agent's own when it runs here,
        else one built as the agent builds its own, over the store read now."""
        if self.agent_app is not None:
            return PersonSearch(self.agent_app.memory.search)  # type: ignore[attr-defined]
        store = self._store
        assert store is not None, "the server has not started"
        if self._search is None or self._search.engine.store is not store:
            if self._search is not None:
                self._search.close()
            self._search = person_search(store, self.config, self.paths,
                                         zone_named(self.config.agent.timezone))
        return self._search

    @property
    def address(self) -> str:
        """The page's address with the access token (print it; it opens the page)."""
        if self._address is None or self.credentials is None:
            raise RuntimeError("the server has not started")
        host, port = self._address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/?token={self.credentials.token}"

    async def start(self) -> str:
        """Reach or start the agent, then listen; returns the address to open."""
        check_address(self.host, allow_remote=self.allow_remote)
        if self.credentials is None:
            self.credentials = Credentials.fresh(scope=str(self.paths.root))
        sock = socket.create_server((self.host, self.port), family=_family(self.host), backlog=64)
        try:
            bridge, store = await self._link()
            keep_token(self.paths.root, self.credentials)
            hosts = ["127.0.0.1", "localhost", "[::1]", self.host]
            web = build_web_app(paths=self.paths, files=self.config.files, bridge=bridge,
                                store=store, credentials=self.credentials,
                                archive=self._archive,
                                first_run=self.first_run, demo=self._demo,
                                start_agent=self._start_agent if self.first_run else None,
                                timezone=self.config.agent.timezone,
                                search=self._person_search,
                                hosts=["*"] if self.allow_remote else hosts)
            self._web = web
            config = uvicorn.Config(web, lifespan="off", log_level="warning", access_log=False,
                                    timeout_graceful_shutdown=1, ws="none")
            self._server = uvicorn.Server(config)
            self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="web:server")
        except BaseException:
            sock.close()
            await self.stop()
            raise
        self._address = sock.getsockname()[:2]
        return self.address

    async def wait(self) -> None:
        """Until the server ends (Ctrl-C, or `stop`)."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def stop(self) -> None:
        """Stop serving; the in-process agent stops too (its history repaired)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._demo is not None:
            await self._demo.stop()
        if self._bridge is not None:
            await self._bridge.aclose()
        if self._agent_host is not None:
            await self._agent_host.aclose()
        if self.agent_app is not None:
            await self.agent_app.aclose()  # type: ignore[attr-defined]
        else:
            if self._store is not None:
                self._store.close()
            if self._archive is not None:
                self._archive.close()
        if self._search is not None:
            self._search.close()
        self._server = self._task = self._bridge = self._agent_host = self._demo = None
        self._search = None
        self.agent_app = self._store = self._archive = None

    async def _link(self) -> tuple[Bridge, TurnStore]:
        if await reachable(self.paths):
            path = socket_path(self.paths)
            self.mode = "attached"
            self._store = TurnStore(self.paths.turns_db)
            if self.paths.archive_db.exists():
                self._archive = SensoryArchive(self.paths.archive_db)
            self._bridge = Bridge(lambda: connect_socket(path, client="web"))
            return self._bridge, self._store
        from ...app import NoModelConfigured, build_app

        make = self.build_app or build_app
        host = Host(self.paths.name)
        try:
            app = make(self.paths, self.config, listener=host)
        except NoModelConfigured as exc:  # the page still helps: it says what to set
            return self._first_run(str(exc))
        self.agent_app, self._agent_host, self.mode = app, host, "in-process"
        host.bind(app)  # type: ignore[arg-type]
        await app.start()  # type: ignore[attr-defined]
        await host.serve(socket_path(self.paths))

        async def attach():
            return host.connect("web")

        self._bridge = Bridge(attach)
        self._archive = app.pipeline.archive  # type: ignore[attr-defined]
        return self._bridge, app.store  # type: ignore[attr-defined]

    async def _start_agent(self) -> str:
        """First run, once the page saved a model: the agent starts in this
        process from the files as they are now, and every page reaches it from
        its next request. Says what the person sees next; raises what stopped it,
        the first run's state left as it was."""
        config = load_config(self.paths)  # ConfigError names what is wrong
        if config.models.reasoning is None:
            raise RuntimeError("the configuration still names no reasoning model")
        before = (self.config, self.first_run, self.mode, self._bridge, self._store, self._demo)
        self.config, self.first_run, self._store = config, None, None
        try:
            bridge, store = await self._link()
        except BaseException:
            await self._unwind_agent()
            self.config, self.first_run, self.mode, self._bridge, self._store, self._demo = before
            raise
        web = self._web.state.web  # type: ignore[attr-defined]
        web.bridge, web.store, web.archive = bridge, store, self._archive
        web.first_run = web.demo = web.start_agent = None
        _, _, _, old_bridge, old_store, demo = before
        self._demo = None
        if demo is not None:
            await demo.stop()
        if old_bridge is not None:
            await old_bridge.aclose()
        if old_store is not None:
            old_store.close()
        if self.mode == "attached":
            return "An agent started meanwhile (`noema run`): this page is attached to it."
        return "The agent has started here with this model: the chat is ready."

    async def _unwind_agent(self) -> None:
        """What a start that failed half-way had built, closed."""
        host, app = self._agent_host, self.agent_app
        self._agent_host = self.agent_app = None
        with contextlib.suppress(Exception):
            if host is not None:
                await host.aclose()
            if app is not None:
                await app.aclose()  # type: ignore[attr-defined]

    def _first_run(self, why: str) -> tuple[Bridge, TurnStore]:
        """No model yet: the pages serve the settings and what to set; nothing runs."""
        self.mode, self.first_run = "first-run", why

        async def attach():
            raise AgentUnavailable(why)

        self.paths.ensure()
        self._store = TurnStore(self.paths.turns_db)
        self._bridge = Bridge(attach)
        self._demo = DemoRun()
        return self._bridge, self._store


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
