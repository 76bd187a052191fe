"""A sandboxed MCP server whose bubblewrap failed before the server started
is started again, from a fresh scan, before the failure counts.

A file the sandbox was to mask may vanish between the scan that built the
bubblewrap line and bubblewrap's mounts, which then fail: a start made a
moment later works. Only a start bubblewrap says it never made is made
again (at most three in all); a server program that started is never
started twice, even one that fails in bubblewrap's words. Starts are
counted, and the moment between the scan and the start is reached, through
`launch.bwrap_argv`, which builds each start's line. Real servers, real
bubblewrap.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import pytest

from noema.paths import AgentPaths
from noema.security.settings import FilesSettings, RootSettings, ShellSettings
from noema.toolservers import ServerFailure, ServerLink, ServerSettings, Surroundings, launch
from tests.security.world import BWRAP

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"
pytestmark = [
    pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here"),
    pytest.mark.slow,
]
# What bubblewrap says when a line asks for an impossible mount; a server may say it too.
LOOKALIKE = "bwrap: Can't find source path /nowhere/at/all: No such file or directory"
EXITS_LIKE_BWRAP = f"import sys; sys.exit({LOOKALIKE!r})"  # a server program that says it and ends


def _world(tmp_path: Path) -> tuple[Surroundings, Path]:
    """An agent whose workspace holds a file the sandbox masks, in a folder of its own."""
    workspace = tmp_path / "ws"
    (workspace / "keys").mkdir(parents=True)
    secret = workspace / "keys" / ".netrc"
    secret.write_text("machine example.org password NETRC-5521\n")
    paths = AgentPaths("t", tmp_path / "home" / "agents" / "t").ensure()
    files = FilesSettings(roots=(RootSettings(path=workspace),))
    return Surroundings.of_agent(files, ShellSettings(), paths, {}), secret


def _server(**overrides) -> ServerSettings:
    # The server needs its Python and its own file; the workspace is read-only to it.
    fields = dict(name="t", command=sys.executable, args=(str(FAKE),), sandbox=True,
                  read_only=(Path(sys.base_prefix), Path(sys.prefix), FAKE.parent),
                  connect_timeout_s=60)
    return ServerSettings(**(fields | overrides))


def _watched(monkeypatch, change=None) -> list[list[str]]:
    """The bubblewrap line of each start, `change(line, number)` applied to it first."""
    starts: list[list[str]] = []
    real = launch.bwrap_argv

    def built(*args, **kwargs) -> list[str]:
        line = real(*args, **kwargs)
        starts.append(list(line))
        if change is not None:
            change(line, len(starts))
        return line

    monkeypatch.setattr(launch, "bwrap_argv", built)
    return starts


async def _failure(link: ServerLink) -> ServerFailure:
    """How asking `link` for its tools fails, the link closed after."""
    try:
        with pytest.raises(ServerFailure) as failed:
            await link.tools()
    finally:
        await link.aclose()
    return failed.value


def _impossible(line: list[str]) -> None:
    at = line.index("--chdir")  # bubblewrap's own options, after the mounts
    line[at:at] = ["--ro-bind", "/nowhere/at/all", "/nowhere"]


async def test_a_masked_file_that_vanishes_before_bubblewrap_mounts_does_not_fail_the_start(
    tmp_path, monkeypatch, caplog,
):
    around, secret = _world(tmp_path)

    def vanish_once(line: list[str], start: int) -> None:
        if start == 1:
            assert str(secret) in line  # it was to be masked
            shutil.rmtree(secret.parent)

    starts = _watched(monkeypatch, vanish_once)
    link = ServerLink(_server(), around)
    caplog.set_level(logging.INFO, logger="noema.toolservers.connection")
    try:
        tools = await link.tools()
        assert "add" in {tool.name for tool in tools}
        result = await link.call("add", {"a": 2, "b": 3})
        assert not result.is_error and result.content[0].text == "5"
    finally:
        await link.aclose()
    assert len(starts) == 2
    assert str(secret) not in starts[1]  # made again from a fresh scan
    assert link.retry_in() == 0  # the failed start did not count
    retries = [r.getMessage() for r in caplog.records
               if "bubblewrap failed before starting the server" in r.getMessage()]
    assert len(retries) == 1 and "bwrap: " in retries[0] and "starting it again" in retries[0]


async def test_a_start_bubblewrap_keeps_failing_is_made_three_times_then_counts(
    tmp_path, monkeypatch,
):
    around, _ = _world(tmp_path)
    starts = _watched(monkeypatch, lambda line, _: _impossible(line))
    link = ServerLink(_server(), around)
    try:
        with pytest.raises(ServerFailure) as failed:
            await link.tools()
        assert len(starts) == 3
        message = str(failed.value)
        assert message.startswith("the MCP server 't' could not be started: bubblewrap")
        assert "(3 starts)" in message
        assert LOOKALIKE in failed.value.detail  # bubblewrap's words, for the person
        assert "/nowhere" not in message  # ...and not for the model
        assert link.retry_in() > 0
        with pytest.raises(ServerFailure, match="is unavailable"):
            await link.tools()  # the backoff holds: no fourth start
        assert len(starts) == 3
    finally:
        await link.aclose()


async def test_a_server_program_that_started_and_exited_is_started_once(tmp_path, monkeypatch):
    around, _ = _world(tmp_path)
    starts = _watched(monkeypatch)
    # It fails the way bubblewrap does, but bubblewrap started it.
    link = ServerLink(_server(args=("-c", EXITS_LIKE_BWRAP)), around)
    failed = await _failure(link)
    assert len(starts) == 1
    assert "could not be started: it closed the connection" in str(failed)
    assert LOOKALIKE in failed.detail
    assert link.retry_in() > 0


async def test_an_unsandboxed_server_that_fails_in_bubblewraps_words_is_started_once(
    tmp_path, monkeypatch,
):
    around, _ = _world(tmp_path)
    starts: list[object] = []
    real = launch.stdio_parameters

    async def counted(*args, **kwargs):
        starts.append(args)
        return await real(*args, **kwargs)

    monkeypatch.setattr(launch, "stdio_parameters", counted)
    link = ServerLink(_server(args=("-c", EXITS_LIKE_BWRAP), sandbox=False), around)
    failed = await _failure(link)
    assert len(starts) == 1
    assert LOOKALIKE in failed.detail
