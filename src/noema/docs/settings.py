"""Settings of the document library.

The TOML shape is

    [docs]
    folders = ["~/Documents/thesis", { path = "~/Downloads/papers", untrusted = true }]
    max_file_mb = 50

A folder is a path, or a table with `path` and `untrusted`. The person's
own documents reach the model as plain text, like `file_read`; a folder
marked `untrusted` (papers downloaded from anywhere, mail attachments)
reaches it inside the untrusted-data envelope, with the file as provenance.
Every folder must also lie inside a root of `[files]`: the access policy
decides what may be read, and the library never reads more than the
file tools could.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

_MIB = 1024 * 1024


class DocsFolder(BaseModel):
    """One folder of documents and whether its text is outside data."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path = Field(description="The folder; '~' is the person's home.")
    untrusted: bool = Field(
        False, description="Wrap this folder's text as untrusted data (not the person's own)."
    )

    @field_validator("path")
    @classmethod
    def _not_empty(cls, value: Path) -> Path:
        if str(value).strip() in ("", "."):
            raise ValueError("a docs folder must name a folder, e.g. '~/Documents'")
        return value


class DocsSettings(BaseModel):
    """The `[docs]` section: which folders are indexed, and how much is read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    folders: tuple[DocsFolder, ...] = Field(
        (), description="Folders whose documents are indexed (inside a [files] root)."
    )
    max_file_mb: int = Field(50, gt=0, le=4096, description="Larger files are not indexed.")

    @field_validator("folders", mode="before")
    @classmethod
    def _paths_or_tables(cls, value: Any) -> Any:
        # A bare string is the common case: `folders = ["~/Documents"]`.
        if isinstance(value, (list, tuple)):
            return [{"path": v} if isinstance(v, (str, Path)) else v for v in value]
        return value

    @property
    def enabled(self) -> bool:
        return bool(self.folders)

    @property
    def max_file_bytes(self) -> int:
        return self.max_file_mb * _MIB
