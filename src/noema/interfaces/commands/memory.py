"""`noema memory` and `noema lab compact`: plain functions that return the text to print.

The export format is JSON lines. The first line is a header,
`{"noema_export": 1, "agent": ..., "exported": ISO time, "save_point": text or null}`
(the save point that was current when the export began, if any); every other
line is one turn with its stored fields: `id, ts, kind, content, tool_name,
call_id, arguments, channel, sender, tokens, cycle_id, flags`. IDs are kept,
so save points written from an export cite the same turns as in the store.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO
from zoneinfo import ZoneInfo

from ...memory import savepoints
from ...memory.chronicler import Chronicler, ChronicleRequest
from ...memory.compaction import draft_save_point, make_report
from ...memory.recall import excerpt, kind_label, turn_body, when
from ...memory.render import compact_ranges, render_turn
from ...memory.savepoints import Report
from ...memory.search import HistorySearch, SearchResult
from ...memory.selection import select_block
from ...memory.session import Session
from ...memory.settings import MemorySettings
from ...memory.store import TurnStore
from ...memory.support import Evidence
from ...memory.tokens import estimate_tokens
from ...memory.turns import ROLE_OF_KIND, Flag, Turn, TurnKind
from ...memory.validator import citable, citations
from ...config import Config, load_secrets
from ...paths import AgentPaths
from ...providers.base import Provider

EXPORT_VERSION = 1
_TURN_FIELDS = ("id", "ts", "kind", "content", "tool_name", "call_id", "arguments", "channel",
                "sender", "tokens", "cycle_id", "flags")


# -- noema memory -----------------------------------------------------------------


def list_save_points(store: TurnStore, session: Session, *, zone: ZoneInfo | None = None) -> str:
    """Every save point, newest first, with its report in one line."""
    found = savepoints.listing(store)
    if not found:
        return (f"No save point yet. The session holds {len(session)} turns; compaction starts "
                "when the context passes its threshold.")
    lines = [f"{'id':>4}  {'status':8}  {'written':16}  {'turns':>13}  {'cited':>5}  "
             f"{'coverage':>8}  {'support':>7}  {'words':>5}  {'retries':>7}  chronicler"]
    for sp in found:
        report = sp.report
        mark = "*" if sp.id == session.save_point_id else " "
        lines.append(
            f"{sp.id:>3}{mark}  {sp.status.value:8}  {when(sp.created, zone):16}  "
            f"{f'{sp.first_turn}-{sp.last_turn}':>13}  {len(report.cited):>5}  "
            f"{report.coverage:>8.0%}  {support_share(sp.support):>7}  {report.words:>5}  "
            f"{report.retries:>7}  {report.chronicler}"
        )
        if not sp.accepted:
            lines.append(f"      rejected: {_why(report)}")
    if session.save_point_id is not None:
        lines.append("* = the save point in the context now.  `noema memory show ID` shows one.")
    else:
        lines.append("No save point is in the context now: the session's turns are all raw.  "
                     "`noema memory show ID` shows one.")
    lines.append("support = the share of its citations whose turn says what the sentence says "
                 "(-: not checked).")
    return "\n".join(lines)


def show_save_point(store: TurnStore, save_point_id: int, *, zone: ZoneInfo | None = None) -> str:
    """One save point: its text, its report, and each citation resolved to its turn."""
    sp = savepoints.get(store, save_point_id)
    if sp is None:
        return f"There is no save point {save_point_id}."
    out = [
        f"Save point {sp.id} ({sp.status.value}), written {when(sp.created, zone)}, narrating "
        f"{len(sp.turn_ids)} turns ({compact_ranges(sp.turn_ids)})"
        + (f", after save point {sp.previous}" if sp.previous else ""),
        "",
        format_report(sp.report),
        "",
    ]
    if sp.text:
        out += ["-" * 72, sp.text.strip(), "-" * 72, ""]
    if not sp.accepted:
        out.append(f"Rejected: {_why(sp.report)}")
        for attempt in sp.report.attempts:
            out.append(f"  attempt {attempt.number}:")
            out.extend(f"    - [{code}] {message}" for code, message in attempt.failures)
        out.append("")
    out.append(resolve_citations(store, sp.text, zone=zone))
    return "\n".join(out)


def resolve_citations(store: TurnStore, text: str, *, zone: ZoneInfo | None = None) -> str:
    """Each cited ID with the turn it points at (the start of it)."""
    ids = sorted({n for c in citations(text) for n in c.ids})
    if not ids:
        return "No citations."
    turns = {t.id: t for t in store.get_many(ids)}
    lines = [f"Citations ({len(ids)}):"]
    for turn_id in ids:
        turn = turns.get(turn_id)
        if turn is None:
            lines.append(f"  {{cite:{turn_id}}} -> NO SUCH TURN")
            continue
        start = excerpt(turn_body(turn))
        lines.append(f"  {{cite:{turn_id}}} -> {kind_label(turn)}, {when(turn.ts, zone)}: {start}")
    return "\n".join(lines)


@dataclass
class PersonSearch:
    """History search for the person (the page, `noema memory search`), built as
    the agent builds its own: see `person_search`."""

    engine: HistorySearch
    words_alone: str | None = None  # why it has no meaning rerank, when it has none

    def how_ranked(self, found: SearchResult) -> str:
        """How `found` was ranked, in a sentence: by words and meaning, as the
        agent's own search, or by words alone and why."""
        if self.engine.meaning is None:
            return f"ranked by words alone: {self.words_alone or 'embeddings are off'}"
        if found.unmeant:
            return f"ranked by words alone: {found.unmeant}"
        return "ranked by words, then by meaning, as the agent's own search ranks"

    def wait_for_meaning(self, wait_s: float) -> bool:
        """Let a local embedding model finish starting (up to `wait_s` seconds): a
        one-off search would otherwise rank by words alone while it loads.
        Whether it is ready (True too when there is nothing to wait for)."""
        import time

        ready = getattr(getattr(self.engine.meaning, "embedder", None), "ready", None)
        deadline = time.monotonic() + wait_s
        while ready is not None and not ready():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def close(self) -> None:
        self.engine.close()


def person_search(store: TurnStore, config: Config, paths: AgentPaths,
                  zone: ZoneInfo | None = None) -> PersonSearch:
    """The person's history search, built as the agent builds its own
    (`memory.assembly` and `app.search_meaning`): the same words, the same
    meaning rerank, so the person's search ranks as the agent's does. Without
    its embeddings (off, or not to be had) it ranks by words and says why."""
    from ...app import search_meaning

    engine = HistorySearch(store, zone=zone)
    try:
        engine.meaning = search_meaning(config, store, load_secrets(paths))
    except ValueError as exc:  # e.g. "provider" embeddings without the provider's address
        return PersonSearch(engine, str(exc))
    return PersonSearch(engine, None if engine.meaning else
                        "embeddings are off ([memory] embeddings)")


def search_memory(
    search: PersonSearch | HistorySearch,
    query: str,
    *,
    limit: int = 10,
    roles: Sequence[str] | None = None,
    zone: ZoneInfo | None = None,
) -> str:
    """`noema memory search QUERY`: ranked turns with their snippets, and how
    they were ranked (a bare `HistorySearch` is the agent's own, as the demo shows it)."""
    if isinstance(search, HistorySearch):
        search = PersonSearch(search)
    found = search.engine.search(query, limit=limit, roles=roles or None)
    if not found.hits:
        return f'Nothing found for "{query}" (searched for: {", ".join(found.terms) or "nothing"}).'
    lines = [f'{len(found.hits)} turn(s) for "{query}" (searched for: {", ".join(found.terms)}; '
             f'{search.how_ranked(found)}):']
    if found.dropped:
        lines.append(f"(left out: {', '.join(found.dropped)})")
    if found.recent_only:
        lines.append(f"(only the latest {found.recent_only:,} turns were searched)")
    for hit in found.hits:
        turn = hit.turn
        lines.append(f"\n#{turn.id}  {kind_label(turn)}  {when(turn.ts, zone)}  score {hit.score:.2f}")
        lines.append(textwrap.indent(textwrap.fill(hit.snippet, 96), "    "))
    return "\n".join(lines)


def support_share(share: float | None) -> str:
    """A save point's share of supported citations, or "-" when none was checked."""
    return "-" if share is None else f"{share:.0%}"


def support_line(report: Report) -> str:
    """What the support check found of a save point's citations, in one line."""
    if not report.judged:
        return "support: not checked (no citation judged, or written before citations were checked)"
    alone = (f"; {report.words_only} judged on words alone (no vectors)"
             if report.words_only else "")
    return (f"support {report.support:.0%}: {report.supported} of {report.judged} citations "
            f"supported by their turn, {report.weak} weak, {report.unsupported} unsupported{alone}")


def format_report(report: Report) -> str:
    """A save point's report as a few lines."""
    lines = [
        f"chronicler {report.chronicler}, language {report.language}; "
        f"{report.retries} retr{'y' if report.retries == 1 else 'ies'}",
        f"cited {len(report.cited)} turn(s): {compact_ranges(report.cited) or 'none'}",
        f"coverage {report.coverage:.0%} ({report.covered} of {report.coverable} messages of "
        "the person and the agent in the block)",
        support_line(report),
        f"length {report.chars:,} characters, {report.words:,} words, about {report.tokens:,} tokens",
    ]
    for attempt in report.attempts:
        verdict = "valid" if not attempt.failures else ", ".join(c for c, _ in attempt.failures)
        gathered = (f", cited turns and clause vectors {attempt.support_ms:.0f} ms"
                    if attempt.support_ms else "")
        lines.append(
            f"attempt {attempt.number}: {verdict} (chronicler {attempt.chronicler_s:.2f} s, "
            f"validator {attempt.validator_ms:.2f} ms{gathered})"
        )
    if report.error:
        lines.append(f"error: {report.error}")
    return "\n".join(lines)


def _why(report: Report) -> str:
    if report.error:
        return report.error
    last = report.attempts[-1] if report.attempts else None
    if last is None or not last.failures:
        return "no reason recorded"
    return "; ".join(code for code, _ in last.failures) + f" (after {len(report.attempts)} attempts)"


# -- export -----------------------------------------------------------------------


def export_turns(
    store: TurnStore,
    out: TextIO,
    *,
    agent: str = "",
    session: Session | None = None,
    first: int | None = None,
    last: int | None = None,
) -> int:
    """Write the turns (all, or the ID range) as an export; returns how many.

    Turns discarded by a cancellation are left out: the model never saw them.
    """
    current = None
    if session is not None and session.save_point_id is not None:
        sp = savepoints.get(store, session.save_point_id)
        current = sp.text if sp else None
    header = {
        "noema_export": EXPORT_VERSION,
        "agent": agent,
        "exported": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "save_point": current,
    }
    out.write(json.dumps(header, ensure_ascii=False) + "\n")
    written = 0
    low, high = first or 1, last or store.last_id()
    for start in range(low, high + 1, 2000):
        for turn in store.range(start, min(start + 1999, high)):
            if turn.has(Flag.DISCARDED):
                continue
            row = {name: getattr(turn, name) for name in _TURN_FIELDS}
            row["kind"], row["flags"] = turn.kind.value, int(turn.flags)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            written += 1
    return written


@dataclass(frozen=True, slots=True)
class Export:
    """An exported conversation read back."""

    turns: tuple[Turn, ...]
    save_point: str | None
    agent: str


def read_export(path: Path) -> Export:
    """Read an export file; errors name the line at fault."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise ValueError(f"{path} is empty")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}, line 1: not JSON ({exc.msg})") from None
    if not isinstance(header, dict) or header.get("noema_export") != EXPORT_VERSION:
        raise ValueError(f"{path}, line 1: not a Noema export (version {EXPORT_VERSION} header)")
    turns = []
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            kind = TurnKind(data["kind"])
            turns.append(Turn(
                id=int(data["id"]), ts=float(data["ts"]), kind=kind, role=ROLE_OF_KIND[kind],
                content=data.get("content") or "", tool_name=data.get("tool_name"),
                call_id=data.get("call_id"), arguments=data.get("arguments"),
                channel=data.get("channel"), sender=data.get("sender"),
                tokens=int(data.get("tokens") or estimate_tokens(data.get("content") or "")),
                cycle_id=data.get("cycle_id"), flags=Flag(int(data.get("flags") or 0)),
            ))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}, line {number}: not a turn ({exc})") from None
    turns.sort(key=lambda t: t.id)
    return Export(tuple(turns), header.get("save_point"), str(header.get("agent") or ""))


# -- noema lab compact ------------------------------------------------------------


async def lab_compact(
    export: Export,
    provider: Provider,
    settings: MemorySettings,
    *,
    language: str = "en",
    agent_name: str = "the agent",
    max_save_points: int = 3,
    block_turns: int | None = None,
    show_text: bool = True,
) -> str:
    """Run the chronicler over an exported conversation, block after block, as the
    agent would, and report what the validator said of each save point.

    Nothing is stored. Blocks are the oldest turns of what is left, cut at safe
    points; `block_turns` fixes their size (default: the settings' block share
    of the whole export, within what the chronicler can read). It stops at the
    first save point that stays invalid after its retries.
    """
    chronicler = Chronicler(provider)
    lang = settings.language_or(language)
    remaining = [t for t in export.turns if not t.has(Flag.DISCARDED)]
    previous = export.save_point
    known = {t.id for t in export.turns}
    by_id = {t.id: t for t in export.turns}
    out = [f"Chronicler {chronicler.label}, language {lang}; {len(remaining)} turns "
           f"({compact_ranges(t.id for t in remaining)})."]
    for number in range(1, max_save_points + 1):
        if not remaining:
            break
        room = int(chronicler.context_window * settings.chronicler_input_fraction) - 1500
        room -= estimate_tokens(previous or "")
        target = sum(t.tokens for t in remaining) * settings.block_fraction
        cost = lambda t: estimate_tokens(render_turn(t, result_chars=settings.render_result_chars))  # noqa: E731
        block = select_block(
            remaining,
            keep_recent=0,
            target_tokens=int(target) if block_turns is None else 10**12,
            max_tokens=max(room, 0),
            min_turns=1,
            max_turns=block_turns or settings.max_block_turns,
            cost=cost,
        )
        if block is None:
            out.append(f"\nNo block of these turns fits in the chronicler's window ({room} tokens).")
            break
        request = ChronicleRequest(
            previous_text=previous,
            block=block.turns,
            citable=citable(previous, block.turns, lambda ids: (i for i in ids if i in known)),
            language=lang,
            agent_name=agent_name,
            result_chars=settings.render_result_chars,
            min_journey_words=settings.min_journey_words,
        )
        draft = await draft_save_point(
            chronicler, request, retries=settings.retries, min_coverage=settings.min_coverage,
            evidence=Evidence(turns=lambda ids: [by_id[i] for i in ids if i in by_id],
                              agent_name=agent_name, language=lang),
        )
        report = make_report(draft, chronicler=chronicler.label, language=lang)
        status = "VALID" if draft.ok else "INVALID"
        out.append(f"\n=== save point {number}: turns {block.first}-{block.last} "
                   f"({len(block.turns)} turns): {status} ===")
        out.append(format_report(report))
        for attempt in report.attempts:
            out.extend(f"  attempt {attempt.number} - [{code}] {message}"
                       for code, message in attempt.failures)
        if show_text and draft.verdict is not None:
            out += ["-" * 72, draft.verdict.text.strip(), "-" * 72]
        if not draft.ok:
            out.append("Stopped: this block stays raw, as it would in the agent.")
            break
        assert draft.verdict is not None
        previous = draft.verdict.text
        taken = set(block.ids)
        remaining = [t for t in remaining if t.id not in taken]
    return "\n".join(out)
