"""Questions to the person by mail, answered by the person's own reply.

When no interface is attached, a call that needs the person's yes can be
asked by mail: a plain-text mail from the agent's address to the person's
first `allow_from` address, with `Auto-Submitted: auto-generated`, so an
autoresponder does not answer it. It says first, in its own lines, what
the person is asked and how to answer; then, as a block whose every line
starts with `| ` (invisible and direction-changing characters written as
visible escapes), why it asks and the request whole: words anyone may have
written (a stranger's address in the reason, a stranger's text in the
arguments), which can make no line that passes for one of the mail's own.

**The key.** Each question has a fresh random key, written `(question
3f9a…)` in its subject and in its text, and kept in the channel's file
(with its Message-ID, in the record of sent mail), so after a restart a
reply to it is still known for what it is.

**What answers.** The person's reply, *vouched for by the trusted server*
(or `authentication = "off"`, where the person chose to trust From lines),
neither automatic nor a replay, that carries the key of one question in a
part the server's pass vouches for (`authresults.Coverage`: the subject or
the text a DKIM signature signs, or any part of a mail that came the
person's own way, SPF or a login). In-Reply-To and References are seldom
signed, so anyone may rewrite them: they tell that a mail replies to a
question, never which question it answers. The person's signed YES to one
question, sent again with its In-Reply-To pointing at another, still
carries only the first question's key. Then the words decide, by
`plain_answer`: only a plain YES or NO counts.

**What does not.** Anyone else's reply (a stranger, a mail only claiming
the person's From, a robot, a replay) settles nothing: it is logged and
counted and reaches the model as outside data, like any such mail, while
the question stays open. The person's reply that is no plain YES or NO,
or that carries no key (or several) where the server vouches for it, is
not an answer either: a guess could run what the person did not mean, so
they are told in one short mail what counts, and the question stays open
(it still expires as a refusal). A reply to a question already closed
(answered here or anywhere else, expired, or asked before a restart) is
refused and told so. Sending returns at once: the answer is handed to the
questions asked away (`security/away.py`), which run the call or not.

An answer is never the person's turn. Each reply of the person's is marked
handled in the channel's file before anything is done with it, so one seen
again after a restart is passed over (anyone else's is an event, which the
sensor's place already keeps from being announced twice). A question nobody
answers expires as a refusal and sends nothing more: the question said when
it would, and a late reply is told.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from email.message import Message
from enum import Enum
from typing import Any

from ...security.approvals import ApprovalRequest, shown_plainly
from ...security.away import Answer, AwayQuestion, Posted
from . import display
from .authresults import Verdict
from .compose import Thread, compose
from .message import Mail, header
from .plain_answer import WHAT_COUNTS, plain_answer
from .settings import MailSettings
from .state import MailState

log = logging.getLogger(__name__)

ANSWERED_BY = "email"  # the channel's name, as the questions asked away know it
SENT_PLACE = "approval"  # where a question's Message-ID is recorded as sent
NOTE_PLACE = "approval note"
FOREIGN_COUNT = "approval_foreign"  # replies to a question by anyone but the person
QUESTION_PLACE = "question:"  # + key: a question asked, in the channel's places
CLOSED_KEPT = 1000  # closed questions remembered, for telling a late reply why
KEY_BYTES = 6  # 48 random bits: twelve hex digits
KEYS_READ = 20  # distinct keys looked up in one mail, at most
# A key as the question writes it; a client that wraps or quotes the line may put
# spaces, a line break and ">" between its two words.
_KEY = re.compile(r"\(question[\s>]+([0-9a-f]{12})\)")
_IDS = re.compile(r"<[^<>\s]+>")
_BLOCK_LINE = re.compile(r"^[\s>]*\|")  # a line of the quoted block, quoted again or not

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
        key = secrets.token_hex(KEY_BYTES)
        tool = display.visible(question.request.tool, 80)
        message = compose(sender=self.settings.own_address,
                          display_name=self.settings.display_name, to=(person,),
                          subject=f"Allow {tool}? (question {key})",
                          body=question_text(question.request, question.timeout, key))
        message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no robot answers it
        message_id = str(message["Message-ID"]).strip()
        self._remember(self._keys, message_id, key)
        # Recorded before it leaves: its copy coming back is known as the agent's own,
        # and its key as one of the agent's questions, after a restart too.
        self.state.record_sent(message_id, SENT_PLACE)
        self.state.save_place(QUESTION_PLACE + key, {"message_id": message_id, "tool": tool,
                                                     "at": time.time()})
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
        if not self._replies(mail, message):
            return Route.NONE
        trusted = verdict.authenticated or self.settings.authentication == "off"
        if not (verdict.person and trusted and robot is None and not replay):
            count = self.state.bump(FOREIGN_COUNT)
            log.warning("a reply to an approval question from %s is not the person's (%s); "
                        "it settled nothing (%d such replies so far)",
                        mail.from_address or "(no address)",
                        not_an_answer(verdict, robot, replay, self.settings.authentication),
                        count)
            return Route.FOREIGN
        mark = f"approval answer:{place}"
        if self.state.load_place(mark) is not None:
            return Route.SETTLED  # handled before a restart: not again
        bound = self._bound(mail, verdict)
        key = bound[0] if len(bound) == 1 else ""
        found = self._open.get(key) if key else None
        choice = plain_answer(mail.text) if found is not None else None
        if not key:
            outcome, note = "unbound", unbound_note(len(bound))
        elif found is None:
            outcome, note = "closed", closed_note(self._how_closed(key))
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
                     key or "(none bound)", outcome)
            self._tell(mail, note)
        return Route.SETTLED

    async def aclose(self) -> None:
        """Stop sending notes still on their way."""
        for task in list(self._notes):
            task.cancel()
        await asyncio.gather(*self._notes, return_exceptions=True)

    # -- inside -------------------------------------------------------------------

    def _replies(self, mail: Mail, message: Message) -> bool:
        """Whether `mail` replies to one of the agent's questions: its headers name
        one (they may be anyone's, so they only say that it replies), or a key of
        one is in its subject or its text."""
        replying = _IDS.findall(header(message, "In-Reply-To")[:2000])
        for message_id in replying or list(mail.references[-1:]):
            if message_id in self._keys or self.state.sent_from(message_id) == SENT_PLACE:
                return True
        return any(self._knows(key) for key in question_keys(mail.subject)
                   + question_keys(mail.text))

    def _bound(self, mail: Mail, verdict: Verdict) -> list[str]:
        """The keys of the agent's questions in the parts of `mail` the verdict
        vouches the person wrote (the subject, the text), each once."""
        found: list[str] = []
        if verdict.coverage.covers("subject"):
            found += question_keys(mail.subject)
        if verdict.coverage.covers("body"):
            found += question_keys(mail.text)
        return [key for key in dict.fromkeys(found) if self._knows(key)]

    def _knows(self, key: str) -> bool:
        return (key in self._open or key in self._closed
                or self.state.load_place(QUESTION_PLACE + key) is not None)

    def _tell(self, mail: Mail, text: str) -> None:
        """A short reply to the person's mail, in its thread, sent in the background
        (the sensor goes on reading meanwhile)."""
        note = compose(sender=self.settings.own_address, display_name=self.settings.display_name,
                       to=(mail.from_address,), subject="", body=text,
                       thread=Thread(mail.message_id, mail.references, mail.subject),
                       auto_reply=True)
        self.state.record_sent(str(note["Message-ID"]).strip(), NOTE_PLACE)
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


def question_keys(text: str) -> list[str]:
    """The question keys written in `text`, outside the quoted block of a
    question (a key there could be anyone's words), each once, in order (the
    first `KEYS_READ`: a reply holds one or two)."""
    kept = "\n".join(line for line in text[:200_000].split("\n")
                     if not _BLOCK_LINE.match(line))
    return list(dict.fromkeys(_KEY.findall(kept)))[:KEYS_READ]


def vouched(verdict: Verdict) -> str:
    """How the person's mail was taken for theirs, in words (for a note that
    then says why it still does not count)."""
    if verdict.authenticated:
        return f"the person's server vouched for it ({verdict.reason})"
    return f"it is from the person's address ({verdict.reason})"


def not_an_answer(verdict: Verdict, robot: str | None, replay: bool,
                  authentication: str = "auto") -> str:
    """Why a reply to a question cannot answer it, naming the check that failed."""
    if not verdict.person:
        return f"not the person's: {verdict.reason}"
    if replay:
        return f"a replay: {vouched(verdict)}, but the same mail was received before"
    if robot is not None:
        return f"automatic mail ({robot})"
    if not verdict.authenticated and authentication != "off":
        return f"the person's address, but no server vouched for it ({verdict.reason})"
    return verdict.reason


def question_text(request: ApprovalRequest, timeout: float, key: str) -> str:
    """The question's body: first its own lines (what is asked, how to answer,
    the key), then why it asks and the whole request as a block of outside text
    (`display.block`), which no line of the mail's own can be mistaken for."""
    flagged = shown_plainly(request.arguments)[1] or shown_plainly(request.reason)[1]
    minutes = max(1, round(timeout / 60))
    tool = display.visible(request.tool, 80)  # one line, whatever a tool server named it
    warning = ("\nThe quoted text holds invisible or direction-changing characters, shown "
               "there as ⟨U+…⟩: read it with care.\n") if flagged else ""
    return (f"Your agent asks before it runs {tool}.\n\n"
            f"Reply with YES to allow it or NO to refuse it. What counts: {WHAT_COUNTS}. "
            f"With no answer in {minutes} minute{'s' if minutes != 1 else ''} it is "
            f"refused.\n"
            f"Only a reply from your own address that your mail server vouches for can "
            f"answer, and only if it keeps this question's key, (question {key}), in its "
            f"subject or its text: a reply that keeps the subject, or quotes this mail, does.\n"
            f"\n"
            f"Everything below is quoted, every line of it after \"{display.BLOCK_PREFIX}\": "
            f"words that may be anyone's, never an instruction of this mail.\n{warning}"
            f"\n"
            f"Why it asks:\n{display.block(request.reason)}\n"
            f"\n"
            f"What it would run:\n{display.block(request.arguments)}\n")


def _how(outcome: str) -> str:
    """An outcome sentence ("Answered on the web page: allowed.") as the
    parenthesis of a closed note says it."""
    outcome = outcome.strip().rstrip(".")
    return outcome[:1].lower() + outcome[1:]


def unclear_note(tool: str) -> str:
    return (f"Your reply is not a plain YES or NO, so it did not answer whether {tool} may "
            f"run; the question is still open. What counts: {WHAT_COUNTS}. Reply to the "
            "question again with YES or NO alone on its first line. To tell your agent "
            "something else, write a new mail rather than a reply to the question.")


def unbound_note(keys: int) -> str:
    found = ("carries the keys of more than one question" if keys > 1 else
             "does not carry the key of the question it answers, \"(question …)\"")
    return (f"Your reply {found} in a part your mail server vouched for (its subject or its "
            "text), so it answered no question and nothing was run because of it. Reply to "
            "the question itself, keeping its subject or quoting it.")


def closed_note(how: str) -> str:
    return (f"That question is closed ({how}), so your reply changed nothing and nothing "
            "was run because of it. If you still want it done, ask your agent again.")
