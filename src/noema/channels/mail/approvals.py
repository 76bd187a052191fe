"""Questions to the person by mail, answered by the person's own reply.

When no interface is attached, a call that needs the person's yes can be
asked by mail: a plain-text mail from the agent's address to the person's
first `allow_from` address, with the request shown whole (invisible and
direction-changing characters written as visible escapes) and
`Auto-Submitted: auto-generated`, so an autoresponder does not answer it.
Its subject carries a fresh random key, `(question 3f9a…)`; its Message-ID
is kept in the channel's record of sent mail, so even after a restart a
reply to it is known for what it is.

**What answers.** A mail answers a question when its In-Reply-To names the
question's Message-ID (with no In-Reply-To: its last References entry; with
neither: the key in its subject). Only the person answers: the sensor's
verdict must say the person, *vouched for by the trusted server* (or
`authentication = "off"`, where the person chose to trust From lines), and
the mail must be neither automatic nor a replay. The first word outside
quoted lines decides: yes, allow, sí, si; or no, refuse, deny.

**What does not.** Anyone else's reply (a stranger, a mail only claiming
the person's From, a robot, a replay) settles nothing: it is logged and
counted and reaches the model as outside data, like any such mail, while
the question stays open. The person's reply that is none of those words is
not an answer either: a guess could run what the person did not mean, so
they are told in one short mail, and the question stays open (it still
expires as a refusal). A reply to a question already closed (answered
here or anywhere else, expired, or asked before a restart) is refused and
told so. Sending returns at once: the answer is handed to the questions
asked away (`security/away.py`), which run the call or not.

An answer is never the person's turn. Each reply of the person's is marked
handled in the channel's file before anything is done with it, so one seen
again after a restart is passed over (anyone else's is an event, which the
sensor's place already keeps from being announced twice). A question nobody answers expires as a refusal and
sends nothing more: the question said when it would, and a late reply is
told.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import string
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from email.message import Message
from enum import Enum
from typing import Any

from ...security.approvals import ApprovalRequest, shown_plainly
from ...security.away import Answer, AwayQuestion, Posted
from .authresults import Verdict
from .compose import Thread, compose
from .message import Mail, header
from .settings import MailSettings
from .state import MailState

log = logging.getLogger(__name__)

ANSWERED_BY = "email"  # the channel's name, as the questions asked away know it
SENT_PLACE = "approval"  # where a question's Message-ID is recorded as sent
NOTE_PLACE = "approval note"
FOREIGN_COUNT = "approval_foreign"  # replies to a question by anyone but the person
YES = frozenset({"yes", "allow", "sí", "si"})
NO = frozenset({"no", "refuse", "deny"})
CLOSED_KEPT = 1000  # closed questions remembered, for telling a late reply why
_KEY = re.compile(r"\(question ([0-9a-f]{12})\)")
_IDS = re.compile(r"<[^<>\s]+>")
_EDGES = string.punctuation + "¡¿«»“”‘’"

Send = Callable[[bytes, tuple[str, ...]], Awaitable[None]]


class Route(Enum):
    """What the sensor does with a mail, once the approvals have seen it."""

    NONE = "none"  # it answers no question: the usual path
    SETTLED = "settled"  # the person's reply to a question: done with, never a turn
    FOREIGN = "foreign"  # someone else's reply to a question: an event, never an answer


@dataclass
class _Open:
    number: int
    answer: Answer
    message_id: str
    tool: str


class MailApprovals:
    """Asks the person by mail and takes the answer from their reply."""

    def __init__(self, settings: MailSettings, state: MailState, send: Send) -> None:
        self.settings = settings
        self.state = state
        self._send = send
        self._open: dict[str, _Open] = {}
        self._keys: OrderedDict[str, str] = OrderedDict()  # Message-ID → key
        self._closed: OrderedDict[str, str] = OrderedDict()  # key → how it closed
        self._notes: set[asyncio.Task[None]] = set()

    @property
    def foreign(self) -> int:
        """Replies to a question that came from anyone but the person, so far."""
        return self.state.count(FOREIGN_COUNT)

    async def post(self, question: AwayQuestion, answer: Answer) -> Posted:
        """Mail the question; the person's reply goes to `answer`. Raises
        RuntimeError when the mail cannot be sent."""
        person = self.settings.allow_from[0]
        key = secrets.token_hex(6)
        tool = shown_plainly(question.request.tool)[0][:80]
        message = compose(sender=self.settings.own_address,
                          display_name=self.settings.display_name, to=(person,),
                          subject=f"Allow {tool}? (question {key})",
                          body=question_text(question.request, question.timeout))
        message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no robot answers it
        message_id = str(message["Message-ID"]).strip()
        self._remember(self._keys, message_id, key)
        # Recorded before it leaves: its copy coming back is known as the agent's own.
        self.state.record_message(message_id, "sent", SENT_PLACE)
        try:
            await self._send(message.as_bytes(), (person,))
        except Exception as exc:
            self._remember(self._closed, key, "it could not be mailed")
            raise RuntimeError(f"the question could not be mailed: {exc}") from None
        self._open[key] = _Open(question.number, answer, message_id, tool)
        log.info("asked %s by mail whether %s may run (question %s)", person, tool, key)
        return Posted(f"by mail to {person}", {"key": key, "message_id": message_id})

    def close(self, handle: Mapping[str, Any], outcome: str) -> None:
        """The question ended elsewhere, or expired: a later reply is told how."""
        key = str(handle.get("key", ""))
        if self._open.pop(key, None) is not None:
            self._remember(self._closed, key, _how(outcome))

    def route(self, mail: Mail, message: Message, place: str, verdict: Verdict,
              robot: str | None, replay: bool) -> Route:
        """Whether `mail` (received at `place`) replies to a question, and if it
        does, settle what the person's reply settles."""
        key = self._question_of(mail, message)
        if key is None:
            return Route.NONE
        vouched = verdict.authenticated or self.settings.authentication == "off"
        if not (verdict.person and vouched and robot is None and not replay):
            count = self.state.bump(FOREIGN_COUNT)
            why = robot or ("a replay" if replay else verdict.reason)
            log.warning("a reply to approval question %s from %s is not the person's (%s); "
                        "it settled nothing (%d such replies so far)", key or "(earlier run)",
                        mail.from_address or "(no address)", why, count)
            return Route.FOREIGN
        mark = f"approval answer:{place}"
        if self.state.load_place(mark) is not None:
            return Route.SETTLED  # handled before a restart: not again
        found = self._open.get(key) if key else None
        choice = answer_word(mail.text)
        if found is None:
            outcome = "closed"
            note = closed_note(self._how_closed(key))
        elif choice is None:
            outcome, note = "unclear", unclear_note(found.tool)
        else:
            outcome, note = ("allowed" if choice else "refused"), None
        self.state.save_place(mark, {"question": key, "outcome": outcome, "at": time.time()})
        if note is None and found is not None:
            del self._open[key]
            refusal = found.answer(found.number, bool(choice), ANSWERED_BY)
            if refusal is None:
                self._remember(self._closed, key, f"you {outcome} it")
                log.info("the person %s question %s by mail", outcome, key)
            else:  # settled elsewhere a moment ago
                self._remember(self._closed, key, refusal)
                note = closed_note(refusal)
        if note is not None:
            log.info("a reply of the person to question %s by mail was %s; told so",
                     key or "(earlier run)", outcome)
            self._tell(mail, note)
        return Route.SETTLED

    async def aclose(self) -> None:
        """Stop sending notes still on their way."""
        for task in list(self._notes):
            task.cancel()
        await asyncio.gather(*self._notes, return_exceptions=True)

    # -- inside -------------------------------------------------------------------

    def _question_of(self, mail: Mail, message: Message) -> str | None:
        """The key of the question `mail` replies to ("" for one asked by an
        earlier run), or None when it replies to none."""
        replying = _IDS.findall(header(message, "In-Reply-To")[:2000])
        named = replying or list(mail.references[-1:])
        if named:
            for message_id in named:
                if message_id in self._keys:
                    return self._keys[message_id]
                if self.state.handled(message_id) == ("sent", SENT_PLACE):
                    return ""
            return None
        found = _KEY.search(mail.subject)
        return found.group(1) if found else None

    def _tell(self, mail: Mail, text: str) -> None:
        """A short reply to the person's mail, in its thread, sent in the background
        (the sensor goes on reading meanwhile)."""
        note = compose(sender=self.settings.own_address, display_name=self.settings.display_name,
                       to=(mail.from_address,), subject="", body=text,
                       thread=Thread(mail.message_id, mail.references, mail.subject),
                       auto_reply=True)
        self.state.record_message(str(note["Message-ID"]).strip(), "sent", NOTE_PLACE)
        task = asyncio.ensure_future(self._deliver(note.as_bytes(), mail.from_address))
        self._notes.add(task)
        task.add_done_callback(self._notes.discard)

    async def _deliver(self, note: bytes, to: str) -> None:
        try:
            await self._send(note, (to,))
        except Exception as exc:  # the answer is decided whatever the note does
            log.warning("a note about an approval could not be mailed to %s: %s", to, exc)

    def _how_closed(self, key: str) -> str:
        if key in self._closed:
            return self._closed[key]
        if key in self._open:
            return "it was answered already"
        return "the agent no longer knows it: asked before it restarted, or never"

    @staticmethod
    def _remember(table: OrderedDict[str, str], name: str, value: str) -> None:
        table[name] = value
        while len(table) > CLOSED_KEPT:
            table.popitem(last=False)


def answer_word(text: str) -> bool | None:
    """The person's answer in a reply's text: its first word outside quoted lines
    (and the "… wrote:" line that introduces them), or None when that word is
    neither a yes nor a no."""
    lines = [line.strip() for line in text.replace("\r\n", "\n").split("\n")]
    for at, line in enumerate(lines):
        if not line or line.startswith(">"):
            continue
        if line == "--" or line.startswith("-- "):
            return None  # a signature, and nothing written above it
        if line.endswith(":") and _quote_follows(lines, at):
            continue
        word = line.split()[0].strip(_EDGES).casefold()
        return True if word in YES else False if word in NO else None
    return None


def _quote_follows(lines: list[str], at: int) -> bool:
    for line in lines[at + 1:]:
        if line:
            return line.startswith(">")
    return False


def question_text(request: ApprovalRequest, timeout: float) -> str:
    """The question's body: the whole request with nothing hidden, and how to answer."""
    arguments, flagged = shown_plainly(request.arguments)
    warning = ("\n\n⚠ The request holds invisible or direction-changing characters, shown "
               "here as ⟨U+…⟩: read it with care.") if flagged else ""
    minutes = max(1, round(timeout / 60))
    tool = shown_plainly(request.tool)[0]
    return (f"Your agent asks before it runs {tool}.\n"
            f"Why it asks: {shown_plainly(request.reason)[0]}\n\n"
            f"{arguments}{warning}\n\n"
            f"Reply with YES to allow it or NO to refuse it (the first word of your reply "
            f"counts). With no answer in {minutes} minute{'s' if minutes != 1 else ''} it "
            f"is refused.\nOnly a reply from your own address that your mail server vouches "
            f"for can answer.\n")


def _how(outcome: str) -> str:
    """An outcome sentence ("Answered on the web page: allowed.") as the
    parenthesis of a closed note says it."""
    outcome = outcome.strip().rstrip(".")
    return outcome[:1].lower() + outcome[1:]


def unclear_note(tool: str) -> str:
    return (f"Your reply does not start with YES or NO, so it did not answer whether "
            f"{tool} may run; the question is still open. Reply to the question again with "
            "YES or NO as its first word. To tell your agent something else, write a new "
            "mail rather than a reply to the question.")


def closed_note(how: str) -> str:
    return (f"That question is closed ({how}), so your reply changed nothing and nothing "
            "was run because of it. If you still want it done, ask your agent again.")
