"""`noema demo`: a scripted conversation through the real stack, offline.

The model is scripted; everything else is real: the SQLite turn store, the
session, the tools, the reasoning cycle, and a real process killed with
SIGKILL in the middle of a reply, then restarted on the same data.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

from ..app import App, build_app
from ..config import AgentSection, Config
from ..interfaces.terminal.chat import TerminalListener
from ..memory.turns import Flag
from ..paths import AgentPaths
from ..providers.base import MessageRole, ModelRequest, StreamEvent
from ..providers.scripted import ScriptedProvider, call, say
from ..security.settings import FilesSettings, RootSettings
from .alerts import alerts_chapter
from .hands import demo_hands
from .library import library_chapter
from .mail import mail_chapter
from .memory import memory_chapter
from .perception import run_perception_demo
from .reflexes import run_reflexes_demo
from .schedule import ZONE as REMINDERS_ZONE, schedule_chapter

SKILL = """\
# Weekly review

Every Friday, go through the week's notes with the person and list what is
open, what is done, and what to drop.

1. Ask which projects moved this week.
2. Read the notes in the workspace.
3. Write the review to reviews/<date>.md.
"""

STORY_WORDS = (
    "Once upon a time, on a quiet machine, an agent kept every word it was told "
    "in a small database, and every night it wrote the day down as a story. "
) * 12


class DemoPrinter(TerminalListener):
    """Prints the demo as a readable transcript."""

    def heading(self, text: str) -> None:
        self.write(f"\n=== {text} ===\n")

    def person(self, text: str) -> None:
        self.write(f"person> {text}\n")

    def say(self, text: str) -> None:
        self.write(f"  {text}\n")

    def on_idle(self) -> None:  # no interactive prompt in the demo
        pass


def demo_config(paths: AgentPaths) -> Config:
    """Defaults, but the workspace is a folder of the demo's own."""
    workspace = paths.agents_dir.parent / "workspace"
    return Config(files=FilesSettings(roots=(RootSettings(path=workspace),)))


def open_demo_app(paths: AgentPaths, provider: ScriptedProvider, listener: DemoPrinter) -> App:
    return build_app(paths, demo_config(paths), provider=provider, listener=listener)


async def _exchange(app: App, printer: DemoPrinter, text: str) -> None:
    printer.person(text)
    app.agent.submit(text)
    await app.agent.idle()


CLOCKS = "{clocks}"  # in a scripted answer: the sentence the times the tool returned make
_TIME_SAID = re.compile(r", (\d\d):(\d\d):\d\d \((\w+)/(\w+), UTC")


def part_of_day(hour: int) -> str:
    """The part of the day an hour (0–23) falls in, as a person says it."""
    if 5 <= hour < 12:
        return "morning"
    if 12 <= hour < 18:
        return "afternoon"
    if 18 <= hour < 22:
        return "evening"
    return "night"


def clocks_sentence(request: ModelRequest) -> str:
    """What the times `get_current_time` returned in this request say, in a
    sentence ("In Madrid it is 17:59, afternoon; in Tokyo 01:59, night")."""
    said: dict[str, tuple[int, str]] = {}
    for message in request.messages:
        if message.role is MessageRole.TOOL and not message.is_error:
            for hour, minute, _, city in _TIME_SAID.findall(message.content):
                said[city] = (int(hour), f"{hour}:{minute}")
    if not said:
        return "The clocks did not answer"
    parts = [f"{city} it is {clock}, {part_of_day(hour)}" for city, (hour, clock) in said.items()]
    return "In " + "; in ".join(parts)


class ReadsTheClocks(ScriptedProvider):
    """The scripted model, whose sentence about the time is written from the
    times the tool returned in the request: a sentence fixed in advance would
    say "morning" beside an evening clock."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if self.position < len(self.responses) and CLOCKS in self.responses[self.position].text:
            scripted = self.responses[self.position]
            self.responses[self.position] = dataclasses.replace(
                scripted, text=scripted.text.replace(CLOCKS, clocks_sentence(request)))
        async for event in super().stream(request):
            yield event


async def chapter_tools(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("1. A conversation with tools")
    provider = ReadsTheClocks(
        [
            say("Let me look at both clocks.",
                call("get_current_time", timezone="Europe/Madrid"),
                call("get_current_time", timezone="Asia/Tokio")),
            say("Tokio was a typo of mine; the zone is Asia/Tokyo.",
                call("get_current_time", timezone="Asia/Tokyo")),
            say(f"{CLOCKS}."),
            say("I have one skill installed; let me read it before I start.",
                call("list_skills"), call("load_skill", _raw='{"skill_id": "weekly-review"')),
            say("My arguments were cut short; again, properly.",
                call("load_skill", skill_id="weekly-review")),
            say("Got it: projects first, then the notes, then a review file for Friday."),
        ],
        token_delay_s=pace,
    )
    app = open_demo_app(paths, provider, printer)
    (paths.identity_dir / "skills").mkdir(parents=True, exist_ok=True)
    (paths.identity_dir / "skills" / "weekly-review.md").write_text(SKILL, encoding="utf-8")
    try:
        await app.start()
        await _exchange(app, printer, "Good morning! What time is it in Madrid and in Tokyo?")
        await _exchange(app, printer, "Can we do a weekly review on Friday?")
        printer.say(
            "A wrong zone name and malformed JSON arguments went back to the model as tool "
            "errors; the conversation went on."
        )
        printer.say(f"The store now holds {app.store.count()} turns; the session has "
                    f"{len(app.session)} of them in context.")
    finally:
        await app.aclose()


CRASH_MARK = "[demo] streaming"


def crash_child(home: str, pace: float) -> None:
    """Runs in a separate process that the demo kills with SIGKILL mid-reply."""
    paths = AgentPaths.for_agent("demo", Path(home))
    provider = ScriptedProvider(
        [say("First, the time.", call("get_current_time", timezone="UTC")), say(STORY_WORDS)],
        token_delay_s=max(pace, 0.02),
    )

    class Child(DemoPrinter):
        def on_tool_end(self, call, result) -> None:  # type: ignore[no-untyped-def]
            super().on_tool_end(call, result)
            self.write(CRASH_MARK + "\n")

    printer = Child(sys.stdout)
    app = open_demo_app(paths, provider, printer)

    async def main() -> None:
        await app.start()
        await _exchange(app, printer, "Tell me a long story about how you remember things.")

    asyncio.run(main())


async def chapter_crash(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("2. The process is killed in the middle of a reply")
    before = _count_turns(paths)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "noema.demo.tour", "crash-child",
        str(paths.root.parent.parent), str(pace),
        stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert child.stdout is not None
    buffer, marked, words = "", False, 0
    # Echo the child's transcript; a dozen words into the story, pull the plug.
    while words < 12:
        chunk = (await child.stdout.read(64)).decode(errors="replace")
        if not chunk:
            printer.write(buffer)
            break
        if marked:
            printer.write(chunk)
            words += len(chunk.split())
            continue
        buffer += chunk
        if CRASH_MARK in buffer:
            head, _, tail = buffer.partition(CRASH_MARK + "\n")
            printer.write(head + tail)
            marked, words = True, len(tail.split())
    child.send_signal(signal.SIGKILL)
    await child.wait()
    printer.write("\n  *** kill -9 ***\n")
    printer.say(f"The process died with signal {-(child.returncode or 0)}; turns on disk went "
                f"from {before} to {_count_turns(paths)}: the question, the tool call and its "
                "result were stored before the reply began; the half-written reply was not.")


async def chapter_restart(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("3. A new process opens the same data")
    provider = ScriptedProvider(
        [say("I was cut off in the middle of that story; the restart note tells me so. "
             "Short version: I keep every turn, and I retell old ones with citations.")],
        token_delay_s=pace,
    )
    app = open_demo_app(paths, provider, printer)
    try:
        await app.start()  # closes the cycle the killed process left open
        await _exchange(app, printer, "Are you still there?")
        kinds = Counter(t.kind.value for t in app.session.turns)
        printer.say(f"Session restored with {len(app.session)} turns "
                    f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}).")
        interrupted = [t for t in app.session.turns if t.has(Flag.SYNTHETIC)]
        for turn in interrupted:
            printer.say(f"turn {turn.id} ({turn.kind}, written by the runtime): {turn.content[:160]}")
    finally:
        await app.aclose()


def _count_turns(paths: AgentPaths) -> int:
    import sqlite3

    if not paths.turns_db.exists():
        return 0
    with sqlite3.connect(paths.turns_db) as db:
        return int(db.execute("SELECT COUNT(*) FROM turns").fetchone()[0])


async def chapter_hands(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("4. Hands with a safety net: versioned writes, undo, the sandbox")
    scratch = paths.agents_dir.parent / "hands"
    await demo_hands(scratch, AgentPaths.for_agent("hands", scratch / "home"), printer.say)


async def chapter_perception(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("5. Perception: what the model sees of a log storm, a chat burst, a mail count")
    run_perception_demo(printer.say, workdir=paths.agents_dir.parent / "perception")


async def chapter_reflexes(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("6. Reflexes: a thought interrupted, safely and unsafely")
    await run_reflexes_demo(printer.out, paths.agents_dir.parent / "reflexes", pace=pace)


async def chapter_memory(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("7. Narrative memory: a save point, a rejected citation, a recall")
    home = paths.agents_dir.parent / "memory"
    await memory_chapter(AgentPaths.for_agent("memory", home), printer.write, printer, pace=pace)



async def chapter_reminders(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("8. A reminder set in Spanish, and fired")
    reminders = AgentPaths.for_agent("reminders", paths.agents_dir.parent)
    config = demo_config(paths).model_copy(
        update={"agent": AgentSection(language="es", timezone=REMINDERS_ZONE)})
    await schedule_chapter(
        lambda provider: build_app(reminders, config, provider=provider, listener=printer),
        printer.say, printer.person, pace)


async def chapter_alerts(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("9. An alert that fires and resolves; a log line found again")
    await alerts_chapter(paths.agents_dir.parent / "alerts", demo_config(paths), printer,
                         printer.say, printer.person, pace)


async def chapter_library(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("10. The person's documents, and a page from the web")
    await library_chapter(paths.agents_dir.parent / "library", demo_config(paths), printer,
                          printer.say, printer.person, pace)


async def chapter_mail(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    printer.heading("11. A colleague in the mailbox: a request answered in its thread, "
                    "a stranger's orders kept as data")
    await mail_chapter(paths.agents_dir.parent / "mail", demo_config(paths), printer,
                       printer.say, printer.person, pace)


CHAPTERS = (chapter_tools, chapter_crash, chapter_restart, chapter_hands, chapter_perception,
            chapter_reflexes, chapter_memory, chapter_reminders, chapter_alerts, chapter_library,
            chapter_mail)


async def _run(paths: AgentPaths, printer: DemoPrinter, pace: float) -> None:
    for chapter in CHAPTERS:
        await chapter(paths, printer, pace)


def run_demo(*, pace: float = 0.01, keep: bool = False, out: TextIO | None = None) -> int:
    """Run every chapter; returns a process exit code."""
    out = out or sys.stdout
    home = Path(tempfile.mkdtemp(prefix="noema-demo-"))
    paths = AgentPaths.for_agent("demo", home).ensure()
    printer = DemoPrinter(out)
    printer.write("Noema demo: a scripted model, everything else real.\n"
                  f"Data folder: {paths.root}\n")
    try:
        asyncio.run(_run(paths, printer, pace))
    finally:
        printer.heading("Where the data lives")
        printer.say(f"turns, session, cycles: {paths.turns_db} (SQLite, WAL)")
        printer.say(f"identity and skills:    {paths.identity_dir}")
        printer.say(f"inspect: sqlite3 {paths.turns_db} "
                    "'SELECT id, kind, substr(content, 1, 60) FROM turns'")
        if keep:
            printer.say(f"kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
            printer.say("(the demo folder was removed; pass --keep to keep it)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "crash-child":
        crash_child(sys.argv[2], float(sys.argv[3]))
