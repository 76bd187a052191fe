"""`noema service install|uninstall`: the agent as a systemd user service.

The unit runs `<this python> -m noema --agent NAME run`, restarts it when it
fails (not when it stops cleanly, nor when its configuration is at fault:
exit status 78, EX_CONFIG, would fail the same way again), and starts it with
the person's session. It lives in `$XDG_CONFIG_HOME/systemd/user/`
(`~/.config/systemd/user/` by default).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CONFIG_EXIT = 78  # EX_CONFIG: `noema run` exits so when its configuration cannot work

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def unit_name(agent: str) -> str:
    return f"noema-{agent}.service"


def unit_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where systemd looks for the user's own units."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home())
                                                 / ".config")
    return Path(base) / "systemd" / "user"


def unit_path(agent: str, environ: Mapping[str, str] | None = None) -> Path:
    return unit_dir(environ) / unit_name(agent)


def _quote(word: str) -> str:
    """One word of a unit's command line or setting, as systemd reads it back."""
    word = word.replace("%", "%%")  # specifiers
    if word and not any(c in word for c in " \t\"'\\$;"):
        return word
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
    return f'"{escaped}"'


def unit_text(agent: str, *, python: str = sys.executable, home: Path | None = None) -> str:
    """The unit file for agent `agent`; `home` is the Noema home when it is not the default."""
    command = " ".join(_quote(w) for w in (python, "-m", "noema", "--agent", agent, "run"))
    environment = ["Environment=PYTHONUNBUFFERED=1"]
    if home is not None:
        environment.append(f"Environment={_quote(f'NOEMA_HOME={home}')}")
    return "\n".join([
        "[Unit]",
        f"Description=Noema agent {agent}",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={command}",
        *environment,
        "Restart=on-failure",
        "RestartSec=5",
        f"RestartPreventExitStatus={CONFIG_EXIT}",
        # `noema run` stops in well under two seconds; the rest is a margin.
        "TimeoutStopSec=20",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an install or uninstall did, for the person."""

    lines: tuple[str, ...]
    ok: bool = True


def _systemctl(environ: Mapping[str, str]) -> str | None:
    return shutil.which("systemctl", path=environ.get("PATH"))


def _run(runner: Runner | None, environ: Mapping[str, str], *args: str
         ) -> subprocess.CompletedProcess[str]:
    if runner is not None:
        return runner(args)
    return subprocess.run(args, capture_output=True, text=True, env=dict(environ), timeout=60,
                          check=False)


def _apply(commands: list[list[str]], environ: Mapping[str, str],
           runner: Runner | None) -> tuple[list[str], bool]:
    """Run systemctl commands in order, or say them when systemctl is absent."""
    systemctl = _systemctl(environ)
    shown = [" ".join(["systemctl", *c]) for c in commands]
    if systemctl is None:
        return ["systemctl is not on this machine's PATH; to apply it, run:",
                *(f"  {line}" for line in shown)], True
    for command, line in zip(commands, shown, strict=True):
        done = _run(runner, environ, systemctl, *command)
        if done.returncode != 0:
            why = " ".join((done.stderr or done.stdout or "").split()) or f"exit {done.returncode}"
            rest = shown[shown.index(line):]
            return [f"`{line}` failed: {why}", "once that is fixed, run:",
                    *(f"  {r}" for r in rest)], False
    return [f"ran: {line}" for line in shown], True


def install(agent: str, *, home: Path | None = None, python: str = sys.executable,
            environ: Mapping[str, str] | None = None, runner: Runner | None = None) -> Outcome:
    """Write the unit, reload systemd's user manager, enable and start the service."""
    environ = os.environ if environ is None else environ
    path = unit_path(agent, environ)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(unit_text(agent, python=python, home=home), encoding="utf-8")
    temporary.replace(path)
    lines, ok = _apply([["--user", "daemon-reload"],
                        ["--user", "enable", "--now", unit_name(agent)]], environ, runner)
    head = f"wrote {path}"
    tail = ([f"`noema --agent {agent} status` shows what it does; "
             f"`journalctl --user -u {unit_name(agent)}` its output"] if ok else [])
    return Outcome((head, *lines, *tail), ok)


def uninstall(agent: str, *, environ: Mapping[str, str] | None = None,
              runner: Runner | None = None) -> Outcome:
    """Stop and disable the service, remove its unit, reload systemd."""
    environ = os.environ if environ is None else environ
    path = unit_path(agent, environ)
    if not path.exists():
        return Outcome((f"there is no unit for agent {agent} ({path} does not exist)",), True)
    lines, ok = _apply([["--user", "disable", "--now", unit_name(agent)]], environ, runner)
    path.unlink()
    reload_lines, reloaded = _apply([["--user", "daemon-reload"]], environ, runner)
    return Outcome((*lines, f"removed {path}", *reload_lines), ok and reloaded)
