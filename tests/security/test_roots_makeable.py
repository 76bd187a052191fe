"""A read-write root that cannot be made because of where it lies (a kernel
file system such as /proc, a read-only one) is refused when the
configuration is read, naming the key, even for root, whom permissions do
not stop; `noema chat` says the same instead of failing at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from noema.config import ConfigError, load_config
from noema.paths import AgentPaths
from noema.security.settings import no_folder_can_be_made_in


def agent_with_roots(home: Path, *roots: str) -> AgentPaths:
    paths = AgentPaths.for_agent("default", home)
    paths.root.mkdir(parents=True)
    paths.config_file.write_text("".join(f"[[files.roots]]\n{root}\n" for root in roots))
    return paths


@pytest.mark.parametrize("where, says", [
    ("/proc/noema-ws/inner", "/proc belongs to the kernel (proc), where no folder can be made"),
    ("/sys/noema-ws", "/sys belongs to the kernel (sysfs), where no folder can be made"),
])
def test_a_root_on_a_kernel_file_system_is_refused_naming_the_key(tmp_path, where, says):
    paths = agent_with_roots(tmp_path, f"path = '{tmp_path}'", f"path = '{where}'")
    with pytest.raises(ConfigError) as refused:
        load_config(paths, environ={})
    assert f"files.roots.1.path: {where} cannot be created: {says}." in str(refused.value)


def test_roots_that_can_be_made_or_are_only_read_pass_and_nothing_is_created(tmp_path):
    missing = tmp_path / "new" / "workspace"
    paths = agent_with_roots(tmp_path / "home", f"path = '{missing}'",
                             "path = '/proc/not-made'\nmode = 'read-only'")
    assert len(load_config(paths, environ={}).files.roots) == 2
    assert not (tmp_path / "new").exists()  # checked, not made
    assert no_folder_can_be_made_in(tmp_path) is None
    assert "kernel" in (no_folder_can_be_made_in(Path("/proc")) or "")


def test_chat_and_config_check_refuse_it_without_a_traceback(tmp_path):
    agent = tmp_path / "home" / "agents" / "default"
    agent.mkdir(parents=True)
    (agent / "config.toml").write_text(
        "[models.reasoning]\nprovider = 'scripted'\nmodel = 's'\nscript = 's.toml'\n"
        "[[files.roots]]\npath = '/proc/noema-workspace'\n")
    (agent / "s.toml").write_text('[[responses]]\ntext = "hi"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    for command in (["config", "check"], ["chat"]):
        done = subprocess.run([sys.executable, "-m", "noema", *command], input="/quit\n",
                              capture_output=True, text=True, timeout=60,
                              env={**env, "NOEMA_HOME": str(tmp_path / "home")})
        assert done.returncode == 1, command
        assert ("files.roots.0.path: /proc/noema-workspace cannot be created: /proc belongs "
                "to the kernel") in done.stderr, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
