"""`noema service install|uninstall`: the unit written, systemctl told (or the
commands shown when it is absent)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from click.testing import CliRunner

from noema.cli import cli
from noema.interfaces.host.service_unit import unit_text

FAKE_SYSTEMCTL = """#!/bin/sh
echo "$@" >> "{log}"
{fail}
"""


def fake_systemctl(folder: Path, *, fail_on: str = "") -> Path:
    """A systemctl that records its arguments (and fails on a word, if asked)."""
    folder.mkdir(exist_ok=True)
    log = folder / "calls.txt"
    fail = (f'case "$*" in *{fail_on}*) echo "Failed to connect to bus" >&2; exit 1;; esac'
            if fail_on else "")
    script = folder / "systemctl"
    script.write_text(FAKE_SYSTEMCTL.format(log=log, fail=fail))
    script.chmod(0o755)
    return log


def env_for(tmp_path: Path, path: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "person"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "NOEMA_HOME": str(tmp_path / "noema"), "PATH": path}


def invoke(env: dict[str, str], *args: str):
    saved = dict(os.environ)
    os.environ.pop("NOEMA_AGENT", None)
    os.environ.update(env)  # shutil.which and the unit's folder read the real environment
    try:
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_install_writes_the_unit_and_enables_it_then_uninstall_removes_it(tmp_path):
    calls = fake_systemctl(tmp_path / "bin")
    env = env_for(tmp_path, str(tmp_path / "bin"))
    unit = tmp_path / "xdg" / "systemd" / "user" / "noema-ana.service"

    result = invoke(env, "--agent", "ana", "service", "install")
    assert result.exit_code == 0, result.output
    text = unit.read_text()
    assert f"ExecStart={sys.executable} -m noema --agent ana run" in text
    assert "Restart=on-failure" in text and "RestartPreventExitStatus=78" in text
    assert f"Environment=NOEMA_HOME={(tmp_path / 'noema').resolve()}" in text
    assert "WantedBy=default.target" in text
    assert calls.read_text().splitlines() == [
        "--user daemon-reload", "--user enable --now noema-ana.service"]
    assert f"wrote {unit}" in result.output

    result = invoke(env, "service", "uninstall", "--agent", "ana")
    assert result.exit_code == 0, result.output
    assert not unit.exists()
    assert calls.read_text().splitlines()[2:] == [
        "--user disable --now noema-ana.service", "--user daemon-reload"]
    result = invoke(env, "service", "uninstall", "--agent", "ana")
    assert result.exit_code == 0 and "there is no unit for agent ana" in result.output


def test_without_systemctl_the_commands_are_shown(tmp_path):
    (tmp_path / "empty").mkdir()
    env = env_for(tmp_path, str(tmp_path / "empty"))
    result = invoke(env, "service", "install")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "xdg" / "systemd" / "user" / "noema-default.service").exists()
    assert "systemctl is not on this machine's PATH" in result.output
    assert "  systemctl --user enable --now noema-default.service" in result.output


def test_a_failing_systemctl_is_reported_with_what_is_left_to_run(tmp_path):
    fake_systemctl(tmp_path / "bin", fail_on="enable")
    env = env_for(tmp_path, str(tmp_path / "bin"))
    result = invoke(env, "--agent", "ana", "service", "install")
    assert result.exit_code == 1
    assert "`systemctl --user enable --now noema-ana.service` failed: Failed to connect to bus" \
        in result.output
    assert (tmp_path / "xdg" / "systemd" / "user" / "noema-ana.service").exists()


def test_the_unit_quotes_what_systemd_would_split_or_expand():
    text = unit_text("ana", python="/opt/my env/bin/python3", home=Path("/data/100%/noema"))
    exec_line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_line == 'ExecStart="/opt/my env/bin/python3" -m noema --agent ana run'
    assert shlex.split(exec_line.removeprefix("ExecStart="))[0] == "/opt/my env/bin/python3"
    assert "Environment=NOEMA_HOME=/data/100%%/noema" in text  # % is a specifier to systemd
