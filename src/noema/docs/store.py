"""The library's index: one SQLite file per agent (`docs.db` beside the turn
store), documents and their outline in tables, the text of each section in
FTS5 with the porter stemmer, as the turn store does.

A document keeps its ID while its file keeps its path, so an ID the model
saw stays good after the file changes; its sections are numbered 1, 2, 3...
in reading order and renumbered when it is indexed again. The text lives
once, in the FTS table, so a snippet and a section's full text come from
the same place.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..health import private_file
from ..paths import AgentPaths
from .formats import Outline

log = logging.getLogger(__name__)

SEPARATOR = " › "

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id        INTEGER PRIMARY KEY,
    path      TEXT NOT NULL UNIQUE,
    untrusted INTEGER NOT NULL,
    format    TEXT NOT NULL,
    title     TEXT NOT NULL,
    pages     INTEGER,
    hash      TEXT NOT NULL,
    size      INTEGER NOT NULL,
    mtime_ns  INTEGER NOT NULL,
    indexed   REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS sections (
    id      INTEGER PRIMARY KEY,  -- the rowid of its text in section_text
    doc_id  INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    number  INTEGER NOT NULL,     -- 1, 2, 3... in reading order: the ID the model uses
    parent  INTEGER,              -- the number of the enclosing section
    level   INTEGER NOT NULL,
    heading TEXT NOT NULL,
    trail   TEXT NOT NULL,        -- the headings from the top down to this one
    page    INTEGER,
    chars   INTEGER NOT NULL,
    UNIQUE (doc_id, number)
);

CREATE VIRTUAL TABLE IF NOT EXISTS section_text USING fts5(
    heading, body, tokenize='porter unicode61 remove_diacritics 2'
);

-- Files that could not be read, so that an unchanged one is not parsed again
-- on every pass and the summary can still say why.
CREATE TABLE IF NOT EXISTS failures (
    path     TEXT PRIMARY KEY,
    hash     TEXT NOT NULL,
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    reason   TEXT NOT NULL
);
"""

# Headings weigh more than body text: a section titled "Sampling" is about sampling.
_RANK = "bm25(section_text, 4.0, 1.0)"
_WORD = re.compile(r"\w+", re.UNICODE)


def index_file(paths: AgentPaths) -> Path:
    """Where an agent's document index lives."""
    return paths.root / "docs.db"


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What was known of a file when it was last looked at."""

    path: str
    hash: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Hit:
    """One section found by a search."""

    doc_id: int
    section: int
    outline_path: str  # "Thesis › 2 Methods › 2.3 Sampling"
    file: str
    page: int | None
    snippet: str
    untrusted: bool


@dataclass(frozen=True, slots=True)
class SectionInfo:
    """A section as the outline shows it."""

    number: int
    level: int
    depth: int  # 0 for top-level entries, whatever their heading level
    heading: str
    page: int | None
    chars: int


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A document's facts and its outline."""

    doc_id: int
    file: str
    format: str
    title: str
    pages: int | None
    untrusted: bool
    sections: tuple[SectionInfo, ...]


@dataclass(frozen=True, slots=True)
class SectionText:
    """The text of one section, with where it sits."""

    number: int
    outline_path: str
    page: int | None
    text: str


def match_expression(query: str, *, every_word: bool) -> str | None:
    """An FTS5 expression for free text: each word quoted (so no word is read
    as an operator), all required or any one; None when the query has no word."""
    words = _WORD.findall(query)
    if not words:
        return None
    quoted = [f'"{w}"' for w in dict.fromkeys(w.lower() for w in words)]
    return " ".join(quoted) if every_word else " OR ".join(quoted)


def _nest(outline: Outline) -> list[tuple[int | None, str]]:
    """(parent number, trail) per section: a heading encloses the deeper ones
    that follow it. The opening text (level 0) encloses nothing."""
    stack: list[tuple[int, int, str]] = []  # level, number, trail
    out: list[tuple[int | None, str]] = []
    for number, section in enumerate(outline.sections, 1):
        while stack and stack[-1][0] >= section.level:
            stack.pop()
        parent = stack[-1] if stack else None
        # A heading that repeats the title (a Markdown '# Title') adds nothing to a path.
        own = "" if section.heading.casefold() == outline.title.casefold() else section.heading
        trail = SEPARATOR.join(t for t in (parent[2] if parent else "", own) if t)
        out.append((parent[1] if parent else None, trail))
        if section.level > 0:
            stack.append((section.level, number, trail))
    return out


def _full_path(title: str, trail: str) -> str:
    return SEPARATOR.join(t for t in (title, trail) if t)


class DocsStore:
    """The index file; safe to share between threads (one connection, one lock)."""

    @classmethod
    def open_or_rebuild(cls, path: Path) -> DocsStore:
        """The index at `path`; a damaged one is moved aside (never deleted) and
        a new one started, since every word of it can be read again from the files."""
        store = None
        try:
            store = cls(path)
            store._check()
            return store
        except sqlite3.DatabaseError as exc:
            if store is not None:
                store.close()
            aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
            log.warning("the document index %s is damaged (%s); moved to %s and rebuilt",
                        path, exc, aside)
            for suffix in ("", "-wal", "-shm"):
                part = Path(f"{path}{suffix}")
                if part.exists():
                    part.rename(Path(f"{aside}{suffix}"))
            return cls(path)

    def _check(self) -> None:
        with self._lock:
            found = self._db.execute("PRAGMA quick_check").fetchone()
        if found is None or found[0] != "ok":
            raise sqlite3.DatabaseError(f"quick_check: {found[0] if found else 'no answer'}")

    def __init__(self, path: Path | str) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            private_file(path)  # its -wal and -shm files take its mode
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        # The index can always be rebuilt from the files: a commit need not
        # wait for the disk, only survive a killed process (as WAL does).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=5000")  # `noema docs index` beside a running agent
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- what the indexer asks ---------------------------------------------------------

    def stamps(self) -> dict[str, FileStamp]:
        """Every indexed file, by path."""
        with self._lock:
            rows = self._db.execute("SELECT path, hash, size, mtime_ns FROM documents")
            return {r[0]: FileStamp(*r) for r in rows}

    def id_of(self, path: str) -> int | None:
        """The ID of the document at this (resolved) path, if it is indexed."""
        with self._lock:
            row = self._db.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
            return row[0] if row else None

    def failures(self) -> dict[str, tuple[FileStamp, str]]:
        """Every file that failed, by path, with its reason."""
        with self._lock:
            rows = self._db.execute("SELECT path, hash, size, mtime_ns, reason FROM failures")
            return {r[0]: (FileStamp(*r[:4]), r[4]) for r in rows}

    def untrusted_paths(self) -> set[str]:
        """The indexed files whose text is outside data."""
        with self._lock:
            return {r[0] for r in self._db.execute(
                "SELECT path FROM documents WHERE untrusted = 1")}

    def set_untrusted(self, path: str, untrusted: bool) -> None:
        """Change whether a file's text is outside data (its folder's setting changed)."""
        with self._lock:
            self._db.execute("UPDATE documents SET untrusted = ? WHERE path = ?",
                             (int(untrusted), path))

    def restamp(self, stamp: FileStamp) -> None:
        """Record a new size and time for a file whose content did not change."""
        with self._lock:
            self._db.execute("UPDATE documents SET size = ?, mtime_ns = ? WHERE path = ?",
                             (stamp.size, stamp.mtime_ns, stamp.path))

    def put(self, stamp: FileStamp, format_: str, outline: Outline, *, untrusted: bool) -> int:
        """Store a document's outline and text, replacing what its path had; its ID."""
        nesting = _nest(outline)
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM failures WHERE path = ?", (stamp.path,))
            row = self._db.execute("SELECT id FROM documents WHERE path = ?",
                                   (stamp.path,)).fetchone()
            values = (int(untrusted), format_, outline.title, outline.pages, stamp.hash,
                      stamp.size, stamp.mtime_ns, time.time())
            if row is None:
                doc_id = self._db.execute(
                    "INSERT INTO documents (untrusted, format, title, pages, hash, size, "
                    "mtime_ns, indexed, path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*values, stamp.path)).lastrowid
            else:
                doc_id = row[0]
                self._drop_sections(doc_id)
                self._db.execute(
                    "UPDATE documents SET untrusted = ?, format = ?, title = ?, pages = ?, "
                    "hash = ?, size = ?, mtime_ns = ?, indexed = ? WHERE id = ?",
                    (*values, doc_id))
            for number, (section, (parent, trail)) in enumerate(
                zip(outline.sections, nesting, strict=True), 1
            ):
                rowid = self._db.execute(
                    "INSERT INTO sections (doc_id, number, parent, level, heading, trail, "
                    "page, chars) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc_id, number, parent, section.level, section.heading, trail,
                     section.page, len(section.text))).lastrowid
                self._db.execute(
                    "INSERT INTO section_text (rowid, heading, body) VALUES (?, ?, ?)",
                    (rowid, section.heading, section.text))
            return doc_id

    def fail(self, stamp: FileStamp, reason: str) -> None:
        """Record a file that could not be read; an older version of it leaves the index."""
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._remove(stamp.path)
            self._db.execute(
                "INSERT OR REPLACE INTO failures (path, hash, size, mtime_ns, reason) "
                "VALUES (?, ?, ?, ?, ?)",
                (stamp.path, stamp.hash, stamp.size, stamp.mtime_ns, reason))

    def remove(self, paths: Sequence[str]) -> None:
        """Forget these files: documents and failures alike."""
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            for path in paths:
                self._remove(path)
                self._db.execute("DELETE FROM failures WHERE path = ?", (path,))

    def _remove(self, path: str) -> None:
        row = self._db.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
        if row is not None:
            self._drop_sections(row[0])
            self._db.execute("DELETE FROM documents WHERE id = ?", (row[0],))

    def _drop_sections(self, doc_id: int) -> None:
        self._db.execute(
            "DELETE FROM section_text WHERE rowid IN (SELECT id FROM sections WHERE doc_id = ?)",
            (doc_id,))
        self._db.execute("DELETE FROM sections WHERE doc_id = ?", (doc_id,))

    # -- what the tools ask ------------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        """(documents, sections) in the index."""
        with self._lock:
            docs = self._db.execute("SELECT count(*) FROM documents").fetchone()[0]
            sections = self._db.execute("SELECT count(*) FROM sections").fetchone()[0]
            return docs, sections

    def search(self, query: str, limit: int) -> list[Hit]:
        """Sections ranked by BM25: those holding every word first, then any word."""
        ranked: list[tuple[int, str]] = []  # (section rowid, the expression that found it)
        with self._lock:
            for every_word in (True, False):
                expression = match_expression(query, every_word=every_word)
                if expression is None or len(ranked) >= limit:
                    break
                seen = {rowid for rowid, _e in ranked}
                rows = self._db.execute(
                    f"SELECT rowid FROM section_text WHERE section_text MATCH ? "
                    f"ORDER BY {_RANK} LIMIT ?", (expression, limit + len(seen)))
                fresh = [r[0] for r in rows if r[0] not in seen]
                ranked += [(rowid, expression) for rowid in fresh[: limit - len(ranked)]]
            return [self._hit(rowid, expression) for rowid, expression in ranked]

    def _hit(self, rowid: int, expression: str) -> Hit:
        # Apart from the ranking: SQLite would build a snippet for every
        # matching section before sorting, and the sort keeps only a few.
        row = self._db.execute(
            "SELECT d.id, s.number, d.title, s.trail, d.path, s.page, "
            "snippet(section_text, 1, '«', '»', '…', 16), d.untrusted "
            "FROM section_text JOIN sections s ON s.id = section_text.rowid "
            "JOIN documents d ON d.id = s.doc_id "
            "WHERE section_text MATCH ? AND section_text.rowid = ?",
            (expression, rowid)).fetchone()
        doc_id, number, title, trail, path, page, snippet, untrusted = row
        return Hit(doc_id, number, _full_path(title, trail), path, page,
                   " ".join(snippet.split()), bool(untrusted))

    def document(self, doc_id: int) -> DocumentInfo | None:
        """A document and its outline, or None when there is no such ID."""
        with self._lock:
            row = self._db.execute(
                "SELECT path, format, title, pages, untrusted FROM documents WHERE id = ?",
                (doc_id,)).fetchone()
            if row is None:
                return None
            rows = self._db.execute(
                "SELECT number, parent, level, heading, page, chars FROM sections "
                "WHERE doc_id = ? ORDER BY number", (doc_id,)).fetchall()
        depth: dict[int, int] = {}
        sections = []
        for number, parent, level, heading, page, chars in rows:
            depth[number] = depth[parent] + 1 if parent in depth else 0
            sections.append(SectionInfo(number, level, depth[number], heading, page, chars))
        path, format_, title, pages, untrusted = row
        return DocumentInfo(doc_id, path, format_, title, pages, bool(untrusted),
                            tuple(sections))

    def texts(self, doc_id: int, numbers: Sequence[int]) -> list[SectionText]:
        """The text of these sections of a document, in the order asked; unknown
        numbers are left out."""
        with self._lock:
            title_row = self._db.execute("SELECT title FROM documents WHERE id = ?",
                                         (doc_id,)).fetchone()
            if title_row is None:
                return []
            out = []
            for number in numbers:
                row = self._db.execute(
                    "SELECT s.trail, s.page, t.body FROM sections s "
                    "JOIN section_text t ON t.rowid = s.id WHERE s.doc_id = ? AND s.number = ?",
                    (doc_id, number)).fetchone()
                if row is not None:
                    out.append(SectionText(number, _full_path(title_row[0], row[0]),
                                           row[1], row[2]))
            return out
