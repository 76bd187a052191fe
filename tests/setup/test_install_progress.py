"""The first install says what it does, how far it is and for how long, and
shows no warning that is not the person's to act on.

`scripts/install_pinned.py` is driven here by a stand-in for pip that prints
what pip prints and writes packages' metadata folders into a folder of the
test's own, so the progress it reads from them is real; the pinned
packages themselves are checked with the real pip of this environment.
"""

from __future__ import annotations

import importlib.util
import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CLONE = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("install_pinned",
                                               CLONE / "scripts" / "install_pinned.py")
assert _spec is not None and _spec.loader is not None
install_pinned = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install_pinned)

LOCK = "alpha==1.0\nbeta==2.0\n# a comment\ngamma==3.0\npip==26.2.1\n"


def fake_pip(tmp_path: Path, site: Path, status: int = 0) -> list[str]:
    """A program that says what pip says for LOCK and installs three packages into `site`."""
    script = tmp_path / "fake_pip.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        site = Path({str(site)!r})
        say = lambda text: print(text, flush=True)
        say("Collecting alpha==1.0 (from -r requirements.lock (line 1))")
        say("WARNING: Location 'file:///opt/index/alpha/' is ignored: it is neither a file nor a directory.")
        say("  Downloading alpha-1.0-py3-none-any.whl (12 kB)")
        say("Processing /opt/files/beta-2.0-cp311-cp311-manylinux_2_28_x86_64.whl (from -r requirements.lock (line 2))")
        say("Collecting gamma==3.0 (from -r requirements.lock (line 3))")
        say("WARNING: Location 'file:///opt/index/gamma/' is ignored: it is neither a file nor a directory.")
        say("Requirement already satisfied: pip==26.2.1 in /venv/lib (26.2.1)")
        say("WARNING: gamma 3.0 was built for an older interpreter")
        if {status}:
            say("ERROR: No matching distribution found for gamma==3.0")
            sys.exit({status})
        say("Installing collected packages: alpha, beta, gamma")
        for name in ("alpha-1.0", "beta-2.0", "gamma-3.0"):
            time.sleep(0.05)
            (site / (name + ".dist-info")).mkdir()
        say("Successfully installed alpha-1.0 beta-2.0 gamma-3.0")
    """))
    return [sys.executable, str(script)]


def run(tmp_path: Path, status: int = 0) -> tuple[int, str, Path]:
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "pip-26.2.1.dist-info").mkdir()  # already there before
    lock = tmp_path / "requirements.lock"
    lock.write_text(LOCK)
    log = tmp_path / "pip-install.log"
    out = io.StringIO()
    code = install_pinned.install(lock, log, out, command=fake_pip(tmp_path, site, status),
                                  sites=[site])
    return code, out.getvalue(), log


def test_the_install_says_what_how_far_and_how_long(tmp_path):
    code, said, log = run(tmp_path)
    assert code == 0
    lines = said.splitlines()
    fetching = [line for line in lines if "checking and fetching" in line]
    installing = [line for line in lines if "installing into the environment" in line]
    assert fetching and installing
    assert re.search(r"checking and fetching: 4 of 4 \(pip\), \d+ s", said)  # the last one named
    assert re.search(r"installing into the environment: 3 of 3, \d+ s$", installing[-1])
    assert re.search(r"^  3 installed, 1 already there, in \d+ s\.$", said, re.MULTILINE)
    # Each count shown is one the packages reached, in order.
    counts = [int(n) for n in re.findall(r"environment: (\d+) of 3", said)]
    assert counts == sorted(counts)
    assert "Successfully installed" in log.read_text()


def test_warnings_are_shown_but_the_index_folder_notes_are_counted_once(tmp_path):
    _, said, log = run(tmp_path)
    assert "WARNING: gamma 3.0 was built for an older interpreter" in said
    assert "is ignored" not in said
    assert f"Its 2 notes about it are in {log}" in said
    assert log.read_text().count("is ignored") == 2  # kept whole in the log


def test_a_failed_install_shows_pips_last_lines_and_its_status(tmp_path):
    code, said, log = run(tmp_path, status=3)
    assert code == 3
    assert "pip could not install the packages (exit 3); its last lines:" in said
    assert "    ERROR: No matching distribution found for gamma==3.0" in said
    assert f"All it said is in {log}." in said
    assert "installed," not in said


def test_the_lock_is_counted_without_comments_or_options(tmp_path):
    lock = tmp_path / "lock"
    lock.write_text("# pinned\n--only-binary :all:\nalpha==1 # why\n\nbeta==2\n")
    assert install_pinned.pinned_count(lock) == 2


@pytest.mark.parametrize(("said", "name"), [
    ("onnxruntime==1.31.1", "onnxruntime"),
    ("/opt/files/lxml-6.1.3-cp311-cp311-manylinux_2_28_x86_64.whl", "lxml"),
    ("jusText==3.0.2 (from -r requirements.lock (line 44))", "jusText"),
    ("lxml[html_clean]>=4.4.2", "lxml"),
])
def test_a_package_is_named_as_a_person_knows_it(said, name):
    assert install_pinned.package_name(said) == name


@pytest.mark.slow
def test_the_pinned_packages_resolve_without_a_warning():
    """With the pinned pip (which setup installs first), resolving the lock as
    installed warns of nothing: older pips warned that lxml has no 'html_clean'
    extra, which justext asks for, though lxml has it, spelt 'html-clean'."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index",
                           "--disable-pip-version-check", "-r", str(CLONE / "requirements.lock")],
                          capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    warnings = [line for line in said.splitlines() if line.startswith("WARNING")
                and not install_pinned._MISSING_FOLDER.match(line)]
    assert warnings == []
    assert "Would install" not in said  # the environment holds the lock as pinned
