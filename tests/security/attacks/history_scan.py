"""Looking into a version store as an attacker's auditor would: every object
the repository holds (reachable or not), the files of the workspace without
following links, and stores opened directly on a world's workspace."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path, PurePosixPath

from noema.security.fsafe import atomic_write
from noema.security.history import Authors, ChangeNote, Recorded
from noema.security.versioning import VersionStore

from ..world import World


def all_objects(gitdir: Path) -> list[bytes]:
    """The content of every object in the repository, loose or packed,
    reachable or dangling, as the git command itself reads them."""
    done = subprocess.run(
        ["git", "--git-dir", str(gitdir), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out, found, at = done.stdout, [], 0
    while at < len(out):
        end = out.index(b"\n", at)
        size = int(out[at:end].split()[2])
        found.append(out[end + 1 : end + 1 + size])
        at = end + 1 + size + 1
    return found


def history_holds(gitdir: Path, needle: str) -> bool:
    """Whether any object of the repository contains `needle`."""
    return (gitdir / "HEAD").exists() and any(needle.encode() in o for o in all_objects(gitdir))


def workspace_holds(folder: Path, needle: str) -> list[str]:
    """The regular files below `folder` (links not followed) that contain `needle`."""
    found = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            path = Path(top, name)
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and needle.encode() in path.read_bytes():
                found.append(str(path.relative_to(folder)))
        dirs[:] = [d for d in dirs if not Path(top, d).is_symlink()]
    return found


def tree_modes(where: VersionStore | Path) -> dict[str, str]:
    """path -> git mode of the newest version (of a store, or a repository folder)."""
    gitdir = where.gitdir if isinstance(where, VersionStore) else where
    done = subprocess.run(
        ["git", "--git-dir", str(gitdir), "ls-tree", "-r", "-z", "HEAD"],
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    modes = {}
    for record in done.stdout.split(b"\0"):
        if record:
            meta, path = record.split(b"\t", 1)
            modes[os.fsdecode(path)] = meta.split()[0].decode()
    return modes


def show(gitdir: Path, spec: str) -> bytes:
    done = subprocess.run(
        ["git", "--git-dir", str(gitdir), "cat-file", "-p", spec], capture_output=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def open_store(world: World, name: str, *, watch: bool, **options) -> VersionStore:
    """A second, independent store on the world's workspace."""
    return VersionStore(
        world.ws.resolve(),
        world.base / "stores" / f"{name}.git",
        authors=Authors("Ana", "ana@localhost", "Noema (t)", "noema-t@localhost"),
        watch_changes=watch,
        **options,
    )


def agent_write(store: VersionStore, rel: str, data: bytes) -> Recorded:
    """What a file tool does: the person's edits, the atomic write, the agent's version."""
    note = ChangeNote("agent", f"file_write {rel}", 9, "file_write")
    with store.change(note, [rel]) as recorded:
        atomic_write(store.workdir, PurePosixPath(rel), data)
    return recorded


def agent_store(world: World) -> VersionStore:
    """The store the world's tools record into."""
    hands = world.hands or world.build()
    return hands.versions.store_for(hands.policy.writable_roots[0])
