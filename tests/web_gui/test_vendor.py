"""The chart and code-colouring libraries are served from the package as
pinned: the vendored files match their sums, and the page gets those very bytes."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

import httpx
from .conftest import sign_in

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "vendor_web_libs"


def _pins():
    loader = importlib.machinery.SourceFileLoader("vendor_web_libs", str(SCRIPT))
    spec = importlib.util.spec_from_loader("vendor_web_libs", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["vendor_web_libs"] = module  # its dataclass looks its module up there
    loader.exec_module(module)
    return module


def test_the_vendored_files_match_their_pinned_sums():
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "match their sums" in done.stdout


def test_the_page_is_served_the_pinned_bytes_with_the_licence_beside_them(live):
    pins = _pins()
    cookies, _ = sign_in(live.server.credentials)
    with httpx.Client(base_url=live.base, cookies=cookies) as c:
        for name, digest in pins.FILES.values():
            response = c.get(f"/static/vendor/{name}")
            assert response.status_code == 200, name
            assert hashlib.sha256(response.content).hexdigest() == digest, name
    licence = (pins.VENDOR / "uPlot.LICENSE").read_text()
    assert "MIT License" in licence and "Leon Sorokin" in licence
    licence = (pins.VENDOR / "highlight.LICENSE").read_text()
    assert "BSD 3-Clause License" in licence and "Ivan Sagalaev" in licence


def test_a_changed_or_missing_file_is_reported(tmp_path):
    pins = _pins()
    names = [name for name, _ in pins.FILES.values()]
    for name in names:
        (tmp_path / name).write_bytes((pins.VENDOR / name).read_bytes())
    pins.VENDOR = tmp_path
    assert pins.check_vendored() == []
    js = tmp_path / names[0]
    js.write_bytes(js.read_bytes() + b"\n")
    (tmp_path / names[1]).unlink()
    assert pins.check_vendored() == [
        f"{js} is not uplot {pins.LIBRARIES[0].version} as pinned (sha256 differs)",
        f"{tmp_path / names[1]} is missing"]
