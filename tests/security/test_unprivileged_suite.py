"""The escape suite, run again as an unprivileged user.

A person may run Noema as root (a container, a small server) or as
themselves; the sandbox and the file tools take different paths in each
case, so every attack must fail in both. When the suite runs as root, this
test runs the escape tests once more as uid 65534 (`nobody`) in a child
pytest. The child gets its own world-readable copy of the code and of the
installed packages, because the checkout and the interpreter may live in
folders that user cannot enter (`/root` is private).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from .world import BWRAP

REPO = Path(__file__).resolve().parents[2]
ESCAPE_SUITE = ("tests/security/attacks", "tests/security/test_attacks_files.py",
                "tests/security/test_attacks_shell.py")
NOBODY = 65534

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # the whole escape suite runs inside this one test
    pytest.mark.skipif(os.geteuid() != 0, reason="the suite already runs unprivileged here"),
    pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing"),
]


def _interpreter() -> str:
    """A Python of the same minor version that any user may execute."""
    wanted = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{wanted}", f"/usr/local/bin/{wanted}"):
        if os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        f"no system-wide {wanted} to run the escape suite unprivileged; "
        f"install it (Debian: apt install {wanted})"
    )


def _mirror(source: Path, dest: Path, *, ignore=None) -> None:
    """Hard links where possible (fast, same file system), copies elsewhere."""

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, dest, symlinks=True, copy_function=link_or_copy, ignore=ignore)


def _public_tree(base: Path) -> Path:
    """src/, tests/, the pytest settings and the packages, readable by anyone."""
    site = Path(sysconfig.get_paths()["purelib"])
    tree = base / "checkout"
    tree.mkdir()
    _mirror(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    _mirror(REPO / "tests", tree / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", tree / "pyproject.toml")
    # The editable install points back into the private checkout; the copy
    # of src/ on PYTHONPATH takes its place.
    _mirror(site, tree / "site", ignore=shutil.ignore_patterns("__editable__*", "__pycache__"))
    for folder, dirs, _files in os.walk(base):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
    os.chmod(base, 0o755)
    return tree


@pytest.fixture
def public_base():
    # Not under pytest's own temporary folder: that one is private to root.
    base = Path(tempfile.mkdtemp(prefix="noema-unprivileged-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_escape_suite_holds_for_an_unprivileged_user(public_base):
    base = public_base
    tree = _public_tree(base)
    home = base / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": f"{tree / 'src'}:{tree}:{tree / 'site'}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": str(home),
    }
    done = subprocess.run(
        [
            "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            _interpreter(), "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "-o", "addopts=", *ESCAPE_SUITE,
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 0, f"as uid {NOBODY}: {summary}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 86, summary
    print(f"escape suite as uid {NOBODY}: {summary}")
