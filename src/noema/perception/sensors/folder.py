"""The folder sensor: one discrete event per file added, modified or deleted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import watchfiles

from ..events import Nature, SensorInfo, TreatmentParams, Urgency
from ..hub import Emitter

_VERB = {
    watchfiles.Change.added: "added",
    watchfiles.Change.modified: "modified",
    watchfiles.Change.deleted: "deleted",
}

_DEFAULT_TREATMENT = TreatmentParams()

Watch = Callable[..., AsyncIterator[set[tuple[watchfiles.Change, str]]]]


def describe_changes(
    changes: Iterable[tuple[watchfiles.Change, str]], root: Path
) -> list[tuple[str, str, dict[str, str]]]:
    """(key, text, payload) per change, in a stable order (by path, then kind)."""
    out = []
    for change, raw in sorted(changes, key=lambda c: (c[1], c[0].value)):
        verb = _VERB.get(change, "changed")
        path = Path(raw)
        try:
            shown = str(path.relative_to(root))
        except ValueError:
            shown = str(path)
        out.append((verb, f"{verb}: {shown}", {"path": str(path), "change": verb}))
    return out


class FolderSensor:
    """Watches a folder (and, by default, its subfolders) for file changes."""

    def __init__(
        self,
        path: Path | str,
        *,
        channel: str,
        recursive: bool = True,
        debounce_ms: int = 500,
        urgency: Urgency = Urgency.NORMAL,
        can_silence: bool = True,
        treatment: TreatmentParams = _DEFAULT_TREATMENT,
        watch: Watch = watchfiles.awatch,
        watch_options: dict[str, Any] | None = None,
        own: Callable[[str], bool] | None = None,
    ) -> None:
        self.path = Path(path)
        self._own = own  # is this path as the agent itself just left it?
        self._recursive = recursive
        self._debounce_ms = debounce_ms
        self._watch = watch
        self._options = watch_options or {}
        self.info = SensorInfo(
            channel,
            f"Files added, modified or deleted in the folder {self.path}.",
            Nature.DISCRETE,
            parameters={"path": str(self.path), "recursive": recursive},
            can_silence=can_silence,
            default_urgency=urgency,
            treatment=treatment,
            words_of="folder",
        )

    async def run(self, emit: Emitter) -> None:
        if not self.path.is_dir():
            raise FileNotFoundError(f"the watched folder {self.path} does not exist")
        root = self.path.resolve()
        sender = str(self.path)
        async for changes in self._watch(
            self.path, recursive=self._recursive, debounce=self._debounce_ms, **self._options
        ):
            if self._own is not None:  # the agent's own writes are not news to it
                changes = {c for c in changes if not self._own(c[1])}
            for key, text, payload in describe_changes(changes, root):
                emit(text, sender=sender, key=key, payload=payload)
