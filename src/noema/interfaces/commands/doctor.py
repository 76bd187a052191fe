"""`noema doctor`: check every store and versions repository of an agent, and
who may read its folder, one line each; with `--repair` keep what can be kept
of the damaged ones and make the folder private.

The stores are the conversation, the senses' archive, the schedules, and
those made by use: the mail and Telegram channels' records, the questions
asked away (`approvals.db`) and the document index (listed when they
exist). The checks read everything (`PRAGMA
integrity_check`, each full-text index's own check, every git object),
unlike the quick check made on each start. A repair never deletes: the
damaged file or repository is moved aside under a timestamped name, and what
still reads takes its place. The document index is not salvaged but begun
anew, since every word of it is read again from the documents.

Schedules keep one promise through a repair: an ID is never given to a
second schedule (so an old list cannot cancel a new one). The salvaged file
continues numbering after the highest ID the damaged file had ever given,
when that still reads, not merely after the highest ID that was kept. The
questions asked away number after both the numbering row they kept and the
highest number kept, and the first start after a repair reports what was
still waiting as expired.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from contextlib import closing
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import pygit2

from ...health import modes
from ...health import repositories as repos
from ...health.agent_files import lost_history, repositories
from ...health.salvage import Salvage, damaged_name, move_aside, salvage
from ...health.sqlite_files import (
    DamagedDatabase,
    DiskFull,
    UnusableDatabase,
    check_file,
    integrity_problems,
    opening,
)
from ...memory.store import TurnStore
from ...paths import AgentLock, AgentPaths
from ...perception.archive import SensoryArchive
from ...scheduling.store import ScheduleStore


class Kind(Enum):
    TURNS = "the conversation"
    ARCHIVE = "the senses' archive"
    SCHEDULES = "alarms and schedules"
    MAIL = "the mail channel's record"
    TELEGRAM = "the Telegram channel's record"
    APPROVALS = "questions asked while you were away"
    DOCS = "the document index"
    FILE_MARKS = "which files hold outside words"
    REPOSITORY = "file versions"
    MODES = "who may read the agent's data"


@dataclass(frozen=True, slots=True)
class Finding:
    """One checked item and what is wrong with it (nothing: healthy)."""

    path: Path
    kind: Kind
    problems: tuple[str, ...] = ()
    absent: bool = False  # not created yet, which is fine
    lost: bool = False  # an empty or missing turn store of an agent that has run
    unchecked: bool = False  # the check itself could not run (a full disk)

    @property
    def healthy(self) -> bool:
        return not self.problems


def examine(paths: AgentPaths) -> list[Finding]:
    """Check every store and versions repository of the agent, then the modes."""
    lost = lost_history(paths)
    turns = (Finding(paths.turns_db, Kind.TURNS, (lost,), lost=True) if lost
             else _database(paths.turns_db, Kind.TURNS))
    found = [turns, _database(paths.archive_db, Kind.ARCHIVE),
             _database(paths.schedules_db, Kind.SCHEDULES)]
    found += [_database(path, kind) for path, kind in _made_by_use(paths) if _present(path)]
    found += [Finding(g, Kind.REPOSITORY, tuple(repos.problems(g))) for g in repositories(paths)]
    found.append(_modes(paths))
    return found


def _made_by_use(paths: AgentPaths) -> tuple[tuple[Path, Kind], ...]:
    """The stores a channel or the document library makes when first used."""
    return ((paths.mail_db, Kind.MAIL), (paths.telegram_db, Kind.TELEGRAM),
            (paths.approvals_db, Kind.APPROVALS), (paths.docs_db, Kind.DOCS),
            (paths.file_marks_db, Kind.FILE_MARKS))


def _present(path: Path) -> bool:
    """Whether anything stands at a store's place: the file, a link, or its WAL
    (a store killed before its first checkpoint is all in its WAL)."""
    wal = path.with_name(path.name + "-wal")
    return path.exists() or path.is_symlink() or wal.exists()


def _modes(paths: AgentPaths) -> Finding:
    loose = tuple(modes.loose_modes(paths))
    if not loose:
        return Finding(paths.root, Kind.MODES)
    problem = (f"{modes.describe(loose, paths.root)}: their modes let other users of this "
               "machine in")
    return Finding(paths.root, Kind.MODES, (problem,))


def report(findings: list[Finding], paths: AgentPaths) -> str:
    """One line per item, then the verdict."""
    lines = []
    for finding in findings:
        name = _name(finding.path, paths)
        if finding.kind is Kind.MODES:
            lines.append("ok       permissions: only you can read the agent's folder"
                         if finding.healthy else
                         f"LOOSE    permissions: {'; '.join(finding.problems)}")
        elif finding.absent:
            lines.append(f"ok       {name} ({finding.kind.value}): not created yet")
        elif finding.healthy:
            lines.append(f"ok       {name} ({finding.kind.value})")
        else:
            verdict = "UNCHECKED" if finding.unchecked else "DAMAGED"
            lines.append(f"{verdict:<8} {name} ({finding.kind.value}): "
                         f"{'; '.join(finding.problems)}")
    if any(f.unchecked for f in findings):
        lines.append("Free some space on that disk, then run `noema doctor` again.")
    stores = [f for f in findings if f.kind is not Kind.MODES]
    damaged = sum(1 for f in stores if not f.healthy and not f.unchecked)
    loose = any(not f.healthy for f in findings if f.kind is Kind.MODES)
    if damaged:
        lines.append(f"{damaged} of {len(stores)} damaged. `noema doctor --repair` keeps what "
                     "can be kept and moves each damaged file aside (nothing is deleted)"
                     + (", and makes the agent's folder private." if loose else "."))
    elif loose:
        lines.append("`noema doctor --repair` makes them readable by you alone "
                     "(files 0600, folders 0700).")
    elif not any(f.unchecked for f in findings):
        lines.append("all healthy")
    return "\n".join(lines)


def repair(findings: list[Finding], paths: AgentPaths) -> str:
    """Repair every damaged item, holding the agent's lock (raises AgentBusy
    while the agent runs); what was kept and lost, one paragraph per item."""
    lock = AgentLock(paths)
    try:
        damaged = [f for f in findings if not f.healthy and not f.unchecked]
        # The modes last: the files a repair puts in place are checked with the rest.
        done = [_repair_one(f, paths) for f in damaged if f.kind is not Kind.MODES]
        if any(f.kind is Kind.MODES for f in damaged):
            done.append(_tightened(paths))
        return "\n".join(done)
    finally:
        lock.release()


def _tightened(paths: AgentPaths) -> str:
    outcome = modes.tighten(modes.loose_modes(paths))
    lines = []
    if outcome.done:
        lines.append(f"made private: {modes.describe(outcome.done, paths.root)}; "
                     "only you can read them now.")
    for item, reason in outcome.failed:
        lines.append(f"could not make {_name(item.path, paths)} private ({reason}); "
                     "it belongs to another account or a read-only disk: "
                     f"`chmod go= {item.path}` as its owner does it.")
    return "\n".join(lines) or "the modes were already private."


def _database(path: Path, kind: Kind) -> Finding:
    if not path.exists() and not path.is_symlink():
        return Finding(path, kind, absent=True)
    try:
        check_file(path)
        with opening(path), closing(sqlite3.connect(path)) as db:
            problems = integrity_problems(db)
    except DiskFull as exc:
        return Finding(path, kind, (f"cannot be checked: {exc}",), unchecked=True)
    except DamagedDatabase as exc:
        problems = [exc.reason]
    except (UnusableDatabase, sqlite3.DatabaseError) as exc:
        problems = [str(exc)]
    return Finding(path, kind, tuple(problems))


def _repair_one(finding: Finding, paths: AgentPaths) -> str:
    name = _name(finding.path, paths)
    try:
        return _repaired(finding, paths, name)
    except (OSError, sqlite3.Error, pygit2.GitError) as exc:
        # Every step before the damaged item is moved aside works on copies.
        return f"could not repair {name} ({exc}); nothing was deleted."


def _repaired(finding: Finding, paths: AgentPaths, name: str) -> str:
    if finding.kind is Kind.REPOSITORY:
        done = repos.repair(finding.path, damaged_name(finding.path))
        return (f"repaired {name}: kept {done.kept_commits} versions, lost "
                f"{done.lost_commits}; the damaged repository is kept as "
                f"{_name(done.aside, paths)}. The next write records the files as they are now.")
    new, finish = _REBUILD[finding.kind]
    if finding.kind is Kind.DOCS:  # read again from the documents, not salvaged
        aside = damaged_name(finding.path)
        move_aside(finding.path, aside)
        new(finding.path)
        return (f"repaired {name}: begun anew, the damaged file is kept as "
                f"{_name(aside, paths)}; the next `noema docs index` (or the agent's start) "
                "reads every document again.")
    if finding.lost or not finding.path.is_file():  # nothing in it to read
        aside = damaged_name(finding.path)
        move_aside(finding.path, aside)
        new(finding.path)
        kept = f"; what was there is kept as {_name(aside, paths)}" if aside.exists() else ""
        after = (" The agent starts a new conversation; its archive and file versions are "
                 "untouched." if finding.kind is Kind.TURNS else "")
        return f"repaired {name}: nothing could be kept{kept}.{after}"
    if finding.kind is Kind.SCHEDULES:
        finish = _numbering_after(_highest_schedule_id(finding.path))
    done = salvage(finding.path, new, finish)
    return _salvage_line(name, done, paths)


def _salvage_line(name: str, done: Salvage, paths: AgentPaths) -> str:
    aside = f"the damaged file is kept as {_name(done.aside, paths)}"
    if not done.readable:
        return f"repaired {name}: nothing could be read, it starts empty; {aside}."
    header = " (its header was rebuilt)" if done.header_rebuilt else ""
    losses = [t.describe() for t in done.tables if t.lost_something]
    if not losses:
        kept = sum(t.kept for t in done.tables)
        return f"repaired {name}{header}: kept all {kept} rows that were there; {aside}."
    return f"repaired {name}{header}: {' | '.join(losses)}; other tables whole; {aside}."


def _new_turn_store(path: Path) -> None:
    TurnStore(path).close()


def _new_archive(path: Path) -> None:
    SensoryArchive(path).close()


def _reindex_archive(path: Path) -> None:
    with SensoryArchive(path) as archive:
        archive.rebuild_index()


def _reindex(path: Path) -> None:
    store = TurnStore(path)
    try:
        store.rebuild_index()
    finally:
        store.close()


def _new_schedules(path: Path) -> None:
    ScheduleStore(path).close()


def _new_mail_record(path: Path) -> None:
    from ...channels.mail.state import MailState

    MailState(path).close()


def _new_telegram_record(path: Path) -> None:
    from ...channels.telegram.state import TelegramState

    TelegramState(path).close()


def _new_approvals(path: Path) -> None:
    from ...security.away_store import AwayStore

    AwayStore(path).close()


def _new_file_marks(path: Path) -> None:
    from ...security.file_marks import FileMarks

    FileMarks(path).close()


def _new_docs_index(path: Path) -> None:
    from ...docs.store import DocsStore

    DocsStore(path).close()


def _highest_schedule_id(path: Path) -> int | None:
    """The highest schedule ID the damaged file ever gave, if that still reads
    (read from a copy: the damaged file is never opened)."""
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".doctor-") as scratch:
        copy = Path(scratch) / path.name
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + "-wal")
        if wal.exists():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        try:
            with closing(sqlite3.connect(copy)) as db:
                row = db.execute(
                    "SELECT seq FROM sqlite_sequence WHERE name = 'schedules'").fetchone()
        except sqlite3.Error:
            return None
    return int(row[0]) if row and isinstance(row[0], int) else None


def _numbering_after(highest: int | None) -> Callable[[Path], None] | None:
    """What makes a salvaged schedules file number new schedules after `highest`."""
    if highest is None:
        return None  # numbering goes on after the highest ID kept

    def finish(path: Path) -> None:
        with closing(sqlite3.connect(path)) as db, db:
            db.execute("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'schedules'",
                       (highest,))
            db.execute("INSERT INTO sqlite_sequence (name, seq) SELECT 'schedules', ?"
                       " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence"
                       " WHERE name = 'schedules')", (highest,))

    return finish


_REBUILD: dict[Kind, tuple[Callable[[Path], None], Callable[[Path], None] | None]] = {
    Kind.TURNS: (_new_turn_store, _reindex),
    Kind.ARCHIVE: (_new_archive, _reindex_archive),
    Kind.SCHEDULES: (_new_schedules, None),
    Kind.MAIL: (_new_mail_record, None),
    Kind.TELEGRAM: (_new_telegram_record, None),
    Kind.APPROVALS: (_new_approvals, None),
    Kind.DOCS: (_new_docs_index, None),
    Kind.FILE_MARKS: (_new_file_marks, None),
}
"""How each kind of database is made anew, and what a salvaged copy needs before use."""


def _name(path: Path, paths: AgentPaths) -> str:
    try:
        return path.relative_to(paths.root).as_posix()
    except ValueError:
        return str(path)

