"""An agent whose commands need bubblewrap says at start when it is missing,
with both ways out; a sandbox turned off, or a bubblewrap present, says nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from noema.paths import AgentPaths

pytestmark = pytest.mark.slow
MODEL = ("[models.reasoning]\nprovider = 'scripted'\nmodel = 's'\nscript = 'script.toml'\n"
         "[[files.roots]]\npath = '{workspace}'\n")


def start(home: Path, shell: str, *command: str) -> subprocess.CompletedProcess:
    paths = AgentPaths.for_agent("default", home).ensure()
    paths.config_file.write_text(MODEL.format(workspace=home / "ws") + shell)
    (paths.root / "script.toml").write_text('[[responses]]\ntext = "Hello."\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    return subprocess.run([sys.executable, "-m", "noema", *command], input="/quit\n", text=True,
                          capture_output=True, env={**env, "NOEMA_HOME": str(home)}, timeout=60)


def test_chat_says_bubblewrap_is_missing_and_how_to_go_on(tmp_path):
    done = start(tmp_path, "[shell]\nbwrap_path = 'no-such-bwrap'\n", "chat")
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if line.startswith("warning: bubblewrap")]
    assert len(warning) == 1 and "('no-such-bwrap') is not installed" in warning[0]
    assert "apt-get install bubblewrap" in warning[0]
    assert '[shell] sandbox = "none"' in warning[0]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the suite installs bubblewrap")
@pytest.mark.parametrize("shell", ["[shell]\nsandbox = 'none'\nbwrap_path = 'no-such-bwrap'\n", ""])
def test_nothing_is_said_when_commands_do_not_need_it_or_it_is_there(tmp_path, shell):
    done = start(tmp_path, shell, "chat")
    assert done.returncode == 0, done.stderr
    assert "warning: bubblewrap" not in done.stderr
