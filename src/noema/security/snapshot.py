"""The workspaces' state at start, recorded as the person's by a child process.

Before the agent's first write in a workspace, the person's pending edits
must be in its history as theirs. Recording them when the agent starts,
rather than at that first write, keeps seconds of scanning a large
workspace off the write. The recording runs in a short child process so
that the agent itself does not load pygit2 until it writes (`versions.py`
says why), and so that the memory a first scan of many files takes is given
back to the system when the child exits instead of staying in the heap of a
process that runs for weeks. The child takes each repository's lock like
any other writer (a `noema undo` typed in a terminal), so a write the agent
makes meanwhile waits for it; a child killed half way leaves a repository
as a `kill -9` of the agent would, which the store recovers from.

    python -m noema.security.snapshot < specs.json
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .history import Authors
from .versions import StoreSpec

if TYPE_CHECKING:
    from .versioning import VersionStore


@dataclass(frozen=True, slots=True)
class Recording:
    """What the start snapshot did in one workspace."""

    workdir: str
    version: str | None = None  # the short ID of the version made, if any
    problem: str | None = None  # why the workspace could not be recorded


def _spec_to_json(spec: StoreSpec) -> dict:
    return {
        "workdir": str(spec.workdir), "gitdir": str(spec.gitdir),
        "authors": dataclasses.asdict(spec.authors), "exclude": list(spec.exclude),
        "private": [str(p) for p in spec.private], "allow_hard_links": spec.allow_hard_links,
    }


def _spec_from_json(data: dict) -> StoreSpec:
    return StoreSpec(
        Path(data["workdir"]), Path(data["gitdir"]), Authors(**data["authors"]),
        tuple(data["exclude"]), tuple(Path(p) for p in data["private"]),
        watch_changes=False,  # one scan, then the child exits
        allow_hard_links=data["allow_hard_links"],
    )


def record(spec: StoreSpec) -> Recording:
    """Open a workspace's store, record its state as the person's, close it."""
    try:
        store = spec.open()
    except Exception as exc:  # noqa: BLE001 - one workspace's trouble must not stop the others
        return Recording(str(spec.workdir), problem=f"{type(exc).__name__}: {exc}")
    try:
        return record_open(store)
    finally:
        store.close()


def record_open(store: VersionStore) -> Recording:
    """Record the state of a workspace whose store is open as the person's."""
    where = str(store.workdir)
    try:
        version = store.record_person()
    except Exception as exc:  # noqa: BLE001
        return Recording(where, problem=f"{type(exc).__name__}: {exc}")
    return Recording(where, version.short if version is not None else None)


async def record_at_start(specs: Sequence[StoreSpec]) -> list[Recording]:
    """Record the workspaces in a child process and say what it did. A child
    that fails as a whole is reported as a problem of every workspace."""
    if not specs:
        return []
    payload = json.dumps([_spec_to_json(s) for s in specs]).encode()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", __name__,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # the person's Ctrl-C stops a reply, not the snapshot
    )
    try:
        out, err = await child.communicate(payload)
    except asyncio.CancelledError:  # the agent stops: the child must not outlive it
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()
        raise
    found = [Recording(**json.loads(line)) for line in out.decode().splitlines() if line]
    if child.returncode != 0 or len(found) != len(specs):
        why = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {child.returncode}"]
        return [Recording(str(s.workdir), problem=f"the snapshot process failed: {why[0]}")
                for s in specs]
    return found


def main() -> int:
    for data in json.load(sys.stdin):
        print(json.dumps(dataclasses.asdict(record(_spec_from_json(data)))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
