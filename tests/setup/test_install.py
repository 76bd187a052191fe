"""Installed like a product: the wheel built from this tree, installed into a
fresh virtual environment, gives a `noema` that works from any folder, with
its web page's templates and scripts inside the package.

Nothing is downloaded: the wheel is built without build isolation and
installed without dependencies; the new environment finds them through a
path file naming this environment's site-packages (a plain path, so the
editable install of the clone living there is not loaded).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow
CLONE = Path(__file__).resolve().parents[2]
PACKAGE = CLONE / "src" / "noema"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the fresh environment's `noema`)."""
    work = tmp_path_factory.mktemp("install")
    tree = work / "tree"  # a copy: building leaves build/ and egg-info behind
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(CLONE / name, tree / name)
    shutil.copytree(CLONE / "src", tree / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(work / "dist"), str(tree)], check=True, timeout=300)
    wheel = next((work / "dist").glob("noema-*.whl"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "noema-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=300)
    return wheel, venv / "bin" / "noema"


def outside(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NOEMA", "PYTHON", "VIRTUAL_ENV"))}
    return {**env, "NOEMA_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}


def test_the_wheel_holds_every_file_of_the_package(installed):
    wheel, _ = installed
    inside = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "src/noema"], cwd=CLONE, capture_output=True,
                             text=True, check=True).stdout.split()
    expected = set()
    for name in tracked:
        if (CLONE / name).is_dir():  # a link to a folder: the guide, whose pages ship
            expected |= {f"{name}/{page.name}" for page in (CLONE / name).glob("*.md")}
        else:
            expected.add(name)
    expected = {name.removeprefix("src/") for name in expected}
    assert any(name.endswith(".html") for name in expected)  # templates are among them
    assert "noema/guide/models.md" in expected  # and the guide's pages
    assert expected - inside == set()


def test_the_installed_command_runs_from_anywhere(installed, tmp_path):
    _, noema = installed
    where = subprocess.run([str(noema.parent / "python"), "-c", "import noema; print(noema.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=outside(tmp_path),
                           check=True).stdout.strip()
    assert Path(where).is_relative_to(noema.parent.parent) and not Path(where).is_relative_to(CLONE)
    version = subprocess.run([str(noema), "--version"], capture_output=True, text=True,
                             cwd=tmp_path, env=outside(tmp_path), timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"noema {importlib.metadata.version('noema')}"
    check = subprocess.run([str(noema), "config", "check"], capture_output=True, text=True,
                           cwd=tmp_path, env=outside(tmp_path), timeout=120)
    assert check.returncode == 0, check.stderr
    assert "configuration is valid; no model is configured yet" in check.stdout


def test_the_installed_web_page_serves_its_templates_and_scripts(installed, tmp_path):
    _, noema = installed
    page = subprocess.Popen([str(noema), "ui", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=outside(tmp_path))
    try:
        address = None
        for line in page.stdout:
            found = re.search(r"Open (http://\S+)", line)
            if found:
                address = found.group(1)
                break
        assert address, page.stderr.read() if page.poll() is not None else "no address printed"
        with httpx.Client(timeout=30, follow_redirects=True) as client:
            first = client.get(address)
            assert first.status_code == 200 and "First, a model" in first.text
            assert "noema setup" in first.text
            script = client.get(address.split("/?")[0] + "/static/chat.js")
            assert script.status_code == 200 and len(script.content) > 100
            guide = client.get(address.split("/?")[0] + "/guide/models")  # Help, offline
            assert guide.status_code == 200 and 'id="local-servers"' in guide.text
    finally:
        page.terminate()
        page.wait(30)
