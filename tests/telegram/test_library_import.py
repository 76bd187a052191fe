"""The channel loads python-telegram-bot without Passport's cryptography and
httpx's command line, and leaves both importable afterwards."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
{before}
import noema.channels.telegram.library
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & {{"cryptography", "rich", "pygments"}})
print(",".join(loaded))
import cryptography.hazmat.primitives.hashes
import telegram._passport.credentials as credentials
print(credentials.CRYPTO_INSTALLED)
"""


def probe(before: str = "") -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(before=before)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_library_loads_without_the_extras_and_they_stay_importable() -> None:
    loaded, passport = probe()
    assert loaded == ""
    # the library saw cryptography missing, which it treats as normal
    assert passport == "False"


@pytest.mark.parametrize("module", ["cryptography", "httpx._main"])
def test_an_extra_already_loaded_is_left_alone(module: str) -> None:
    loaded, passport = probe(before=f"import {module}")
    if module == "cryptography":
        assert "cryptography" in loaded.split(",")
        assert passport == "True"
    else:
        assert "rich" in loaded.split(",")
