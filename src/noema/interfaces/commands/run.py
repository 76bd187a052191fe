"""`noema run`: the agent as a service that interfaces attach to.

The process owns the agent (its lock, its senses, its channels) and serves
the attach protocol on the agent's socket until SIGTERM or SIGINT. Then it
stops in order: interfaces are told goodbye and the socket goes away (no
new request can arrive half-way), the senses stop, the cycle in flight is
cancelled and its history repaired (as on any shutdown), and the stores are
closed. Whatever was acknowledged before is on disk, so the next `noema run`
carries on where this one stopped: a message that had no answer yet is
answered then, once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...app import App, build_app
from ...config import Config
from ...paths import AgentPaths
from ...providers.base import Provider
from ..host.attach import socket_path
from ..host.host import Host

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True, slots=True)
class Stopped:
    """How a run ended: the signal that asked for it and how long stopping took."""

    signal: str
    seconds: float


async def run_agent(paths: AgentPaths, config: Config, *, provider: Provider | None = None,
                    announce: Callable[[str], None] = print) -> Stopped:
    """Run the agent until a stop signal; build errors (no model, agent busy,
    a damaged store) are raised before anything starts."""
    host = Host(paths.name)
    app = build_app(paths, config, provider=provider, listener=host)
    host.bind(app)
    loop = asyncio.get_running_loop()
    asked: asyncio.Future[str] = loop.create_future()

    def ask_stop(sig: signal.Signals) -> None:
        if asked.done():
            log.info("%s while stopping: the stop goes on", sig.name)
            return
        log.info("%s received: stopping", sig.name)
        asked.set_result(sig.name)

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, ask_stop, sig)
    try:
        try:
            await app.start()
            await host.serve(socket_path(paths))
        except BaseException:
            await _stop(host, app)
            raise
        announce(f"noema: agent {paths.name} runs (pid {host.pid}, model "
                 f"{app.provider.name}/{app.provider.model}); `noema chat` attaches to it, "
                 "`noema status` shows what it does")
        log.info("agent %s runs; socket %s", paths.name, socket_path(paths))
        which = await asked
        began = time.monotonic()
        await _stop(host, app)
        took = time.monotonic() - began
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    log.info("agent %s stopped on %s in %.2f s", paths.name, which, took)
    announce(f"noema: agent {paths.name} stopped ({which}, {took:.2f} s)")
    return Stopped(which, took)


async def _stop(host: Host, app: App) -> None:
    """Interfaces first (goodbye, socket removed), then the agent and its stores."""
    try:
        await host.aclose()
    finally:
        await app.aclose()
