"""An MCP server from a Python virtual environment runs in the sandbox with
nothing configured: the environment and its base interpreter are lent
read-only. A program the sandbox cannot show is refused with the
`read_only` entry that fixes it, and that entry does fix it.

The environment is made for real (`python -m venv`) in a temporary folder;
the server in it speaks MCP with the standard library alone
(tests/fakes/mcp_stdlib_server.py), so the environment holds nothing else.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from noema.paths import AgentPaths
from noema.perception.untrusted import SessionDelimiter
from noema.security.settings import AutonomySettings, FilesSettings, RootSettings, ShellSettings
from noema.toolservers import McpSettings, ServerSettings, Surroundings, ToolServers
from noema.toolservers import describe_servers
from noema.toolservers.launch import interpreter_folders
from tests.security.world import BWRAP

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_stdlib_server.py"
pytestmark = pytest.mark.slow
sandboxed = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A real virtual environment whose site-packages holds the server module."""
    where = tmp_path_factory.mktemp("project") / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(where)], check=True, capture_output=True, timeout=120)
    (site,) = where.glob("lib/python3*/site-packages")
    shutil.copy(SERVER, site / "stdlib_mcp.py")
    return where


def around_workspace(tmp_path: Path) -> Surroundings:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    paths = AgentPaths("t", tmp_path / "home" / "agents" / "t").ensure()
    files = FilesSettings(roots=(RootSettings(path=workspace),))
    return Surroundings.of_agent(files, ShellSettings(), paths, {})


async def where(server: ServerSettings, around: Surroundings) -> str:
    """What the server's `where` tool says, called through the real SDK client."""
    servers = ToolServers(McpSettings(servers=[server]), around, SessionDelimiter.new(),
                          AutonomySettings())
    try:
        await servers.start()
        (report,) = servers.reports
        assert report.problem is None, report.lines()
        result = await servers.links[0].call("where", {})
    finally:
        await servers.aclose()
    return result.content[0].text


@pytest.mark.parametrize("sandbox", [pytest.param(True, marks=sandboxed), False])
async def test_a_server_starts_with_the_persons_umask_not_the_agents(
        venv, tmp_path, private_process, sandbox):
    server = ServerSettings(name="env", command=str(venv / "bin" / "python"),
                            args=("-m", "stdlib_mcp"), sandbox=sandbox)
    said = await where(server, around_workspace(tmp_path))
    assert f"umask={private_process:04o}" in said, said
    assert f"prefix={venv}" in said


async def test_a_missing_unsandboxed_program_is_said_before_it_starts(tmp_path,
                                                                      private_process):
    server = ServerSettings(name="gone", command="no-such-mcp-server-here", sandbox=False)
    lines = await describe_servers(McpSettings(servers=[server]), around_workspace(tmp_path))
    assert "the program 'no-such-mcp-server-here' was not found on PATH" in "\n".join(lines)


def test_the_folders_of_a_virtual_environment_are_found_from_its_pyvenv_cfg(venv):
    home = Path(sys.base_prefix).resolve()
    found = interpreter_folders(str(venv / "bin" / "python"))
    assert venv in found
    assert any(home.is_relative_to(f) for f in found), found  # the base interpreter's prefix
    # A script of the environment, and a script whose #! line names its python.
    assert venv in interpreter_folders(str(venv / "bin" / "python3"))
    script = venv.parent / "tool"
    script.write_text(f"#!{venv / 'bin' / 'python'}\nprint('hi')\n")
    assert venv in interpreter_folders(str(script))
    assert interpreter_folders("/usr/bin/env") == ()  # not a Python environment: nothing lent


@sandboxed
async def test_a_server_from_a_virtual_environment_runs_in_the_sandbox_as_configured(
        venv, tmp_path):
    server = ServerSettings(name="env", command=str(venv / "bin" / "python"),
                            args=("-m", "stdlib_mcp"), sandbox=True)
    said = await where(server, around_workspace(tmp_path))
    assert f"prefix={venv}" in said, said


@sandboxed
async def test_a_program_the_sandbox_cannot_show_is_refused_with_the_read_only_fix(
        venv, tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    program = tools / "stdlib-mcp"
    program.write_text(f"#!{venv / 'bin' / 'python'}\n" + SERVER.read_text())
    program.chmod(0o755)
    around = around_workspace(tmp_path)
    server = ServerSettings(name="tools", command=str(program), sandbox=True)

    lines = await describe_servers(McpSettings(servers=[server]), around)
    text = "\n".join(lines)
    assert "failed" in text and "lies outside what its sandbox shows" in text, text
    (fix,) = re.findall(r'read_only = \["([^"]+)"\]', text)
    assert Path(fix) == tools and "[mcp.servers.tools]" in text

    lent = ServerSettings(name="tools", command=str(program), sandbox=True, read_only=(fix,))
    said = await where(lent, around)  # the fix it named is the fix
    assert f"prefix={venv}" in said, said


@sandboxed
async def test_a_server_without_the_network_cannot_reach_a_socket_in_a_root(venv, tmp_path):
    """The commands' system-call filter holds for tool servers too: a canary
    listening on a Unix socket inside the workspace hears nobody."""
    import asyncio
    import socket as sockets

    around = around_workspace(tmp_path)
    path = tmp_path / "ws" / "canary.sock"
    canary = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    canary.bind(str(path))
    canary.listen(4)
    canary.setblocking(False)
    server = ServerSettings(name="py", command=str(venv / "bin" / "python"),
                            args=["-m", "stdlib_mcp"], network=False)
    servers = ToolServers(McpSettings(servers=[server]), around, SessionDelimiter.new(),
                          AutonomySettings())
    try:
        await servers.start()
        (report,) = servers.reports
        assert report.problem is None, report.lines()
        result = await servers.links[0].call("unix_connect", {"path": str(path)})
        said = result.content[0].text
    finally:
        await servers.aclose()
    try:
        canary.accept()
        heard = True
    except BlockingIOError:
        heard = False
    finally:
        canary.close()
    await asyncio.sleep(0)
    assert said.startswith("refused"), said
    assert not heard  # the evidence: the canary was never reached
