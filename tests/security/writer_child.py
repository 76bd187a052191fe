"""A writer process for the kill test: rewrites one file forever, alternating
two large contents, until it is killed."""

import sys
from pathlib import Path, PurePosixPath

from noema.security.fsafe import atomic_write

SIZE = 3 * 1024 * 1024


def content(letter: str) -> bytes:
    return letter.encode() * SIZE


if __name__ == "__main__":
    root = Path(sys.argv[1])
    (root / "started").write_text("yes")
    n = 0
    while True:
        atomic_write(root, PurePosixPath("big.bin"), content("AB"[n % 2]))
        n += 1
