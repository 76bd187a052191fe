"""The commands the README's "Choose a model" and the guide's Models page give,
run as written against a fresh home: if the docs and the program drift
apart, this fails.

Each shell block of those sections runs as one script in its own new home,
from the clone's folder, as a person would paste it. Two things are not
run here: `./run` (the chat itself, tested elsewhere) and the bare
`noema setup`, which asks questions (tests/setup/test_setup.py drives it in a
pty). `noema setup --provider …` is pointed with `--base-url` at a fake
server of that kind, since no real one listens at the default address here.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.fakes import FakeReply, FakeToolCall
from tests.fakes.local_servers import FakeLocalServer

pytestmark = pytest.mark.slow
CLONE = Path(__file__).resolve().parents[2]
NOT_RUN = {"./run", ".venv/bin/noema setup"}


def section(title: str, path: str = "README.md") -> str:
    text = (CLONE / path).read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def shell_blocks(text: str) -> list[list[str]]:
    """The command lines of each untagged code block (TOML and INI blocks are not commands)."""
    blocks = re.findall(r"^```\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    return [[line for line in block.splitlines() if line.strip()] for block in blocks]


def run_block(lines: list[str], home: Path, server: FakeLocalServer) -> subprocess.CompletedProcess:
    script = ["set -e"]
    for line in lines:
        command = line.split("  #")[0].strip()
        if command in NOT_RUN:
            continue
        if re.match(r"\.venv/bin/noema setup --provider ", command):
            command += f" --base-url {server.base_url}"
        script.append(command)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")
           and not k.endswith("_API_KEY")}
    return subprocess.run(["bash", "-c", "\n".join(script)], cwd=CLONE, capture_output=True,
                          text=True, env={**env, "NOEMA_HOME": str(home)}, timeout=300)


@pytest.mark.parametrize(("path", "titles"), [
    ("README.md", ["Choose a model"]),
    ("docs/models.md", ["Choose a model with `noema setup`", "Or set the keys yourself"]),
])
def test_the_model_commands_work_as_written(tmp_path, path, titles):
    blocks = [block for title in titles for block in shell_blocks(section(title, path))]
    commands = [line for block in blocks for line in block]
    assert ".venv/bin/noema setup" in commands  # the first run is the path the docs give
    assert any("config set models.reasoning.provider openai" in c for c in commands)
    assert any(re.search(r"config set (\S+=\S+ ){2,}", c) for c in commands)  # several at once
    with FakeLocalServer("ollama", {"llama3.1:8b": 131072}) as server:
        server.default = FakeReply(tool_calls=(FakeToolCall("report_ready", '{"word": "ready"}'),))
        for number, block in enumerate(blocks):
            home = tmp_path / f"home-{number}"
            done = run_block(block, home, server)
            assert done.returncode == 0, (block, done.stdout, done.stderr)
            assert "Traceback" not in done.stdout + done.stderr
            config = home / "agents" / "default" / "config.toml"
            if any(line.startswith(".venv/bin/noema") and line not in NOT_RUN for line in block):
                assert tomllib.loads(config.read_text())["models"]["reasoning"]["model"]
