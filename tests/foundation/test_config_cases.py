"""Configuration that used to crash a command or fail open: each case is a clear
error from `noema config check` and from every command that needs it, and no
secret-looking value is ever printed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from noema.app import build_app, offered_tool_names
from noema.config import load_config, looks_secret, mask_secrets
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, say

from .damage import no_traceback, noema

pytestmark = pytest.mark.slow
NOEMA = [sys.executable, "-m", "noema"]
KEY = "sk-proj-Zx81Qm2Lw93Nv47Hb65Tk30Pa19Rc"
MODEL = "[models.reasoning]\nprovider = 'scripted'\nmodel = 's'\nscript = 'script.toml'\n"


def agent(home: Path, config: str = MODEL) -> AgentPaths:
    paths = AgentPaths.for_agent("default", home).ensure()
    paths.config_file.write_text(config)
    (paths.root / "script.toml").write_text('[[responses]]\ntext = "Hello again."\n')
    return paths


def chat(home: Path, *options: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    done = subprocess.run([*NOEMA, *options, "chat"], input="hello\n/quit\n", text=True,
                          capture_output=True, env={**env, "NOEMA_HOME": str(home)}, timeout=60)
    return done.returncode, done.stdout + done.stderr


def _config_bytes(data: bytes) -> Callable[[AgentPaths], None]:
    return lambda paths: paths.config_file.write_bytes(data)


def _config_folder(paths: AgentPaths) -> None:
    paths.config_file.unlink()
    paths.config_file.mkdir()


def _secrets(text: str) -> Callable[[AgentPaths], None]:
    return lambda paths: paths.secrets_file.write_text(text)


def _secrets_folder(paths: AgentPaths) -> None:
    paths.secrets_file.mkdir()


def _root(path_of: Callable[[Path], Path]) -> Callable[[AgentPaths], None]:
    def setup(paths: AgentPaths) -> None:
        blocker = paths.root.parent.parent.parent / "a-file"
        blocker.write_text("not a folder")
        root = path_of(blocker)
        paths.config_file.write_text(MODEL + f"[[files.roots]]\npath = '{root}'\n")
    return setup


CASES = {
    "config.toml not UTF-8": (_config_bytes(b"[agent]\nlanguage = '\xe9s'\n"), "not UTF-8 text"),
    "config.toml a folder": (_config_folder, "config.toml is a folder, not a file"),
    "secrets.toml bad syntax": (_secrets(f"OPENAI_API_KEY = {KEY}\n"), "not valid TOML"),
    "secrets.toml wrong types": (_secrets("OPENAI_API_KEY = 42\n[more]\nx = 1\n"),
                                 "OPENAI_API_KEY: a secret must be a quoted text"),
    "secrets.toml a folder": (_secrets_folder, "secrets.toml is a folder, not a file"),
    "a root that is a file": (_root(lambda blocker: blocker), "a-file is a file, not a folder"),
    "a root that cannot be created": (_root(lambda blocker: blocker / "workspace"),
                                      "cannot be created: "),
    "a key pasted as api_key_env": (
        lambda paths: paths.config_file.write_text(
            "[models.reasoning]\nprovider = 'openai'\nmodel = 'gpt-4o'\n"
            f"api_key_env = '{KEY}'\n"),
        "api_key_env must be the NAME of the variable"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_case_is_a_clear_error_from_every_command(tmp_path, case):
    setup, expected = CASES[case]
    home = tmp_path / "home"
    setup(agent(home))
    for command in (["config", "check"], ["memory"], ["history"], ["config", "show"]):
        result = noema(home, *command)
        no_traceback(result)
        assert result.exit_code == 1, (command, result.output)
        assert expected in result.output, (command, result.output)
        assert KEY not in result.output and KEY[:12] not in result.output
    code, shown = chat(home)
    assert code == 1 and expected in shown and "Traceback" not in shown
    assert KEY not in shown and KEY[:12] not in shown


def test_a_home_that_is_a_file_is_refused_by_every_command(tmp_path):
    home = tmp_path / "home"
    home.write_text("a file")
    for command in (["config", "check"], ["memory"], ["history"], ["demo"], ["doctor"]):
        result = noema(home, *command)
        no_traceback(result)
        assert result.exit_code == 2, (command, result.output)
        assert f"{home} is a file" in result.output and "--home" in result.output
    code, shown = chat(home)
    assert code == 2 and f"{home} is a file" in shown and "Traceback" not in shown


def test_a_misspelt_tool_name_is_an_error_naming_the_closest_tool(tmp_path):
    home = tmp_path / "home"
    agent(home, MODEL + "[autonomy.tools]\nshell_exec = 'deny'\nfile_write = 'ask'\n")
    checked = noema(home, "config", "check")
    assert checked.exit_code == 1
    assert "autonomy.tools.shell_exec: there is no tool named 'shell_exec'" in checked.output
    assert "Did you mean 'shell_execute'?" in checked.output
    assert "file_write, " in checked.output  # the list of the tools
    assert "autonomy.tools.file_write" not in checked.output  # a real tool is fine
    code, shown = chat(home)
    assert code == 1 and "Did you mean 'shell_execute'?" in shown and "Hello again" not in shown


async def test_config_check_knows_the_same_tools_the_agent_is_offered(tmp_path):
    paths = agent(tmp_path / "home", MODEL + f"[[files.roots]]\npath = '{tmp_path / 'ws'}'\n")
    config = load_config(paths, environ={})
    app = build_app(paths, config, provider=ScriptedProvider([say("hi")]))
    try:
        assert sorted(app.tools.names()) == sorted(offered_tool_names(config, paths))
    finally:
        await app.aclose()


@pytest.mark.parametrize("make", ["missing", "a folder"])
def test_a_log_sensor_that_cannot_read_its_file_is_a_warning_and_a_notice(tmp_path, make):
    log = tmp_path / "app.log"
    if make == "a folder":
        log.mkdir()
    home = tmp_path / "home"
    agent(home, MODEL + f"[[perception.logs]]\npath = '{log}'\n")
    checked = noema(home, "config", "check")
    assert checked.exit_code == 0, checked.output  # a log may appear later
    reason = "does not exist" if make == "missing" else "is a folder, not a log file"
    assert f"warning: perception.logs.0.path: {log} {reason}" in checked.output
    assert "the log.app.log sensor waits" in checked.output
    code, shown = chat(home)
    assert code == 0 and f"{log} {reason}" in shown and "Hello again." in shown


def test_secret_looking_values_are_masked_and_names_are_not():
    for secret in (KEY, "xoxb-2048-4096-Zq8rT5uW3yE1", "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
                   "AKIAIOSFODNN7EXAMPLE", "a3f9c2e1b7d4a6f8e0c5b3d9a1f7e2c4b8d6"):
        assert looks_secret(secret)
        masked = mask_secrets(f"got {secret!r} here")
        assert secret not in masked and secret[:3] in masked
    for name in ("OPENAI_API_KEY", "models.reasoning.api_key_env", "claude-3-5-sonnet-20241022",
                 "/home/someone/.noema/agents/default/config.toml", "Europe/Madrid",
                 "Qwen/Qwen2.5-Coder-32B-Instruct-AWQ", "SmolLM2-135M-Instruct.Q4_1.gguf",
                 "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
                 "mistralai/Mistral-Small-3.1-24B-Instruct-2503"):
        assert not looks_secret(name) and mask_secrets(name) == name


def test_config_set_refuses_a_value_that_looks_like_a_key(tmp_path):
    home = tmp_path / "home"
    agent(home)
    result = noema(home, "config", "set", "models.reasoning.model", KEY)
    assert result.exit_code == 1 and "secrets do not go in config.toml" in result.output
    assert KEY not in result.output


def _as_nobody(work: Callable[[], str]) -> str:
    """What `work` returns, run in a forked child as uid 65534. A child,
    because changing this process's own uid while other threads run (the
    servers of other tests) is not safe; forked, because that user may not
    be able to enter the folders this interpreter lives in."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one thread, nothing but `work`
        code = 1
        try:
            os.close(reader)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.write(writer, work().encode())
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    with os.fdopen(reader) as out:
        text = out.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, text
    return text


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to read as another user")
def test_a_settings_file_the_user_cannot_read_is_said_so():
    import tempfile

    from noema.config import ConfigError, read_config_file, read_secrets_file

    def read_both() -> str:
        said = []
        for name, read in (("config.toml", read_config_file), ("secrets.toml", read_secrets_file)):
            try:
                read(folder / name)
            except ConfigError as exc:
                said.append(str(exc))
            else:
                said.append(f"{name} was read")
        return "\0".join(said)

    folder = Path(tempfile.mkdtemp(prefix="noema-unreadable-"))
    try:
        folder.chmod(0o755)
        for name in ("config.toml", "secrets.toml"):
            (folder / name).write_text(f'NAME = "{KEY}"\n')
            (folder / name).chmod(0o000)
        said = _as_nobody(read_both).split("\0")
        assert len(said) == 2, said
        assert all(re.search("cannot be read .*permissions", one, re.S) for one in said), said
        assert KEY not in "".join(said)
    finally:
        shutil.rmtree(folder)


async def test_the_model_sees_a_log_sensor_waiting_until_its_file_appears(tmp_path):
    import json

    from noema.providers.base import ToolCall
    from noema.tools.registry import ToolContext

    log = tmp_path / "app.log"
    paths = agent(tmp_path / "home", MODEL + f"[[perception.logs]]\npath = '{log}'\n")
    app = build_app(paths, load_config(paths, environ={}), provider=ScriptedProvider([say("hi")]))
    try:
        async def status() -> str:
            call = ToolCall("c1", "sensor_status", json.dumps({"channels": ["log.app.log"]}))
            return (await app.tools.call(call, ToolContext("c1", 1, 1))).content

        assert f"log.app.log: active, but waiting: {log} does not exist" in await status()
        log.write_text("started\n")
        assert "log.app.log: active." in await status()
    finally:
        await app.aclose()
