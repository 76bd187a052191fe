"""The attach protocol: how an interface talks to a running agent.

One agent process (`noema run`, or `noema chat`/`noema ui` when nothing else
runs it) owns the agent; every interface attaches to it, over the agent's
local socket or, in the same process, over an in-memory connection. Both carry
the same typed messages, so the terminal chat, `noema status` and the web page
are clients of one protocol.

Framing: one JSON object per line (UTF-8, `\\n`-terminated, at most
`MAX_LINE` bytes), with a `type` field naming the message. The first message a
client sends is `Hello` with the protocol version it speaks; the host answers
`Welcome` (or `Refused` and closes). The version changes only when a message
changes meaning; new optional fields and new message types keep the version,
and a client ignores a message type it does not know.

Every message from the host carries `seq`, a number that grows by one per
message the host broadcasts. A client that reconnects says in `Hello.since`
the last `seq` it saw and gets what it missed from a bounded backlog, in order
and once (`Welcome.complete` is False when the backlog no longer reaches that
far back, and the client should then reload its view from `status`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal, Protocol, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ...channels.view import ChannelView

PROTOCOL_VERSION = 1
MAX_LINE = 1 << 20  # a line longer than this is a protocol error


class _Message(BaseModel):
    # Unknown fields are allowed: a newer peer may add optional ones.
    model_config = ConfigDict(extra="ignore", frozen=True)


# -- what a client sends ------------------------------------------------------


class Hello(_Message):
    """The first message of a client: who it is and what it last saw."""

    type: Literal["hello"] = "hello"
    version: int = PROTOCOL_VERSION
    client: str = ""  # "chat", "status", "web"…, for the host's log and status
    since: int | None = None  # the last seq this client saw, to resume after a reconnect
    # False for a connection that only sends requests (the web server's own):
    # nobody reads a question there, so the host does not count it as someone
    # at the machine to ask.
    watching: bool = True


class Say(_Message):
    """A message from the person, typed at this interface."""

    type: Literal["say"] = "say"
    request: int
    text: str


class Stop(_Message):
    """Stop the current cycle (as `/stop` does)."""

    type: Literal["stop"] = "stop"
    request: int


class AskStatus(_Message):
    """Ask for a `Status` snapshot."""

    type: Literal["status"] = "status"
    request: int


class Answer(_Message):
    """The person's answer to the `ApprovalAsked` numbered `approval`, and to
    no other: one naming a question that is not open is refused. With
    `request`, the host answers `Done` (refused: `ok` False and why);
    without, a refusal comes as a `Notice` to this client."""

    type: Literal["answer"] = "answer"
    approval: int
    allow: bool
    request: int | None = None


# The person's hand on the senses. A host that does not know these types
# answers `Done(ok=False, error="not understood: …")`, as for any new type
# (new types keep the version). Both are answered by `Done` to the asking
# client only; the new state is read back with `AskStatus`.


class Silence(_Message):
    """Silence a channel for `seconds` (the host caps it at its longest silence):
    its events are counted and archived, not delivered."""

    type: Literal["silence"] = "silence"
    request: int
    channel: str
    seconds: float = Field(gt=0, allow_inf_nan=False)


class StartSense(_Message):
    """Reopen a silenced channel now."""

    type: Literal["start_sense"] = "start_sense"
    request: int
    channel: str


ClientMessage = Annotated[
    Union[Hello, Say, Stop, AskStatus, Answer, Silence, StartSense], Field(discriminator="type")
]


# -- what the host sends -------------------------------------------------------


class _Broadcast(_Message):
    seq: int = 0  # set by the host when the message is broadcast


class TurnView(_Message):
    """A stored turn as interfaces see it."""

    id: int
    ts: float
    kind: str  # TurnKind's value: "user", "assistant", "tool_call", "tool_result", …
    content: str
    tool_name: str | None = None
    arguments: str | None = None
    channel: str | None = None
    sender: str | None = None
    cycle_id: int | None = None
    error: bool = False  # a tool result that reports a failure
    call_id: str | None = None  # pairs a tool call with its result
    waiting: bool = False  # a tool result whose call waits for the person's answer away
    answered: str | None = None  # for a waiting one later answered: allowed, refused, expired


class SensorView(_Message):
    """One sensor as `noema status` shows it."""

    channel: str
    nature: str  # discrete, aggregatable, mergeable, state
    urgency: str  # its default urgency
    state: str  # "active", "silenced", "crashed"…
    silenced_until: float | None = None
    events: int = 0  # received since the agent started
    can_silence: bool = True  # False: the sensor refuses to be silenced (a schedule, a chat)


class RequestView(_Message):
    """What the next request to the model carries, part by part (estimated tokens)."""

    system: int = 0  # the system prompt, the save point included
    save_point: int = 0
    tools: int = 0
    tools_offered: int = 0
    tools_total: int = 0
    turns: int = 0
    turn_tokens: int = 0
    answer: int = 0  # the answer reserve
    left_out: int = 0
    cut: int = 0
    problem: str = ""  # why no request fits the window at all


class StatusView(_Message):
    """What the agent is doing, for `noema status`, `/status` and the web page."""

    agent: str
    pid: int
    started_at: float
    phase: str  # the reflexes' phase: idle, running, cancelling…
    busy: bool
    context_tokens: int
    context_window: int
    session_turns: int
    waiting_messages: int
    waiting_events: dict[str, int] = {}  # by urgency: normal, priority, urgent
    held: bool = False  # events wait for the person after a stop or a failure
    world_tokens_spent: int = 0
    world_tokens_per_hour: int | None = None
    world_budget_exhausted: bool = False
    sensors: list[SensorView] = []
    channels: list[ChannelView] = []
    clients: int = 0  # interfaces attached now
    last_error: str | None = None
    save_point_id: int | None = None
    request: RequestView | None = None
    memory: str = ""  # what compaction is doing, or why the last one failed; empty: nothing


class Welcome(_Broadcast):
    """The host accepted the client; what it missed follows, in order."""

    type: Literal["welcome"] = "welcome"
    version: int = PROTOCOL_VERSION
    agent: str
    complete: bool = True  # False: `Hello.since` is older than the backlog


class Refused(_Broadcast):
    """The host will not talk to this client (and closes the connection)."""

    type: Literal["refused"] = "refused"
    reason: str


class Done(_Broadcast):
    """The answer to a request: `ok`, or an error the person can read."""

    type: Literal["done"] = "done"
    request: int
    ok: bool = True
    error: str | None = None
    turn_id: int | None = None  # the stored turn of a `Say`


class Said(_Broadcast):
    """A message from the person was taken, from whatever channel."""

    type: Literal["said"] = "said"
    turn: TurnView


class CycleStarted(_Broadcast):
    type: Literal["cycle_started"] = "cycle_started"
    cycle_id: int
    origin: str


class TextDelta(_Broadcast):
    """A piece of the answer as the model writes it."""

    type: Literal["text"] = "text"
    cycle_id: int | None = None
    delta: str


class TurnStored(_Broadcast):
    """A turn the cycle stored: the complete answer, a call, a result, a delivery."""

    type: Literal["turn"] = "turn"
    turn: TurnView


class ToolStarted(_Broadcast):
    type: Literal["tool_started"] = "tool_started"
    call: TurnView
    side_effects: bool


class ToolFinished(_Broadcast):
    type: Literal["tool_finished"] = "tool_finished"
    call: TurnView
    result: TurnView


class CycleEnded(_Broadcast):
    type: Literal["cycle_ended"] = "cycle_ended"
    cycle_id: int
    outcome: str  # done, stopped, cancelled_safe, cancelled_unsafe, step_limit, failed…
    error: str | None = None


class RetryWaiting(_Broadcast):
    """The model request failed before any answer; retried at `until`."""

    type: Literal["retry"] = "retry"
    retry: int
    of: int
    seconds: float
    until: float  # wall-clock time of the retry, for a countdown
    line: str  # RetryWait.describe()


class Notice(_Broadcast):
    """A line for the person: a sensor failed, senses are off, a guard engaged…"""

    type: Literal["notice"] = "notice"
    text: str
    about: str = ""  # "memory": the status changed with it (compaction began or ended)


class Decided(_Broadcast):
    """A decision of the reflexes, as performed (deliver, queue, cancel…)."""

    type: Literal["decided"] = "decided"
    kind: str  # the decision's class name: Deliver, SafeCancel, UnsafeCancel…
    detail: str = ""


class Idle(_Broadcast):
    """No cycle runs; the agent waits for the person or the world."""

    type: Literal["idle"] = "idle"


class ApprovalAsked(_Broadcast):
    """A tool at autonomy level `ask` waits for the person. The first `Answer`
    from any client settles it."""

    type: Literal["approval_asked"] = "approval_asked"
    approval: int
    tool: str
    arguments: str
    reason: str
    where: str = ""  # "on Telegram" when asked on the person's channels; "" at the machine
    expires_at: float | None = None  # epoch seconds: unanswered by then, it is refused


class ApprovalSettled(_Broadcast):
    type: Literal["approval_settled"] = "approval_settled"
    approval: int
    allowed: bool
    by: str = ""  # which client answered, or "timeout", "stopped"
    # For a question asked away, the call whose waiting result now carries
    # the answer (TurnView.answered).
    call_id: str | None = None


class Status(_Broadcast):
    """The answer to `AskStatus` (sent to the asking client only)."""

    type: Literal["status"] = "status"
    request: int
    status: StatusView


class Goodbye(_Broadcast):
    """The host is stopping; the connection closes after this."""

    type: Literal["goodbye"] = "goodbye"
    reason: str = ""


ServerMessage = Annotated[
    Union[Welcome, Refused, Done, Said, CycleStarted, TextDelta, TurnStored, ToolStarted,
          ToolFinished, CycleEnded, RetryWaiting, Notice, Decided, Idle, ApprovalAsked,
          ApprovalSettled, Status, Goodbye],
    Field(discriminator="type"),
]

_client_messages: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)
_server_messages: TypeAdapter[ServerMessage] = TypeAdapter(ServerMessage)


class ProtocolError(Exception):
    """A line that is not a message of this protocol; the text says what is wrong."""


def encode(message: _Message) -> bytes:
    """One message as one line."""
    return message.model_dump_json().encode() + b"\n"


def decode_client(line: bytes | str) -> ClientMessage:
    """A client's line as a message, or ProtocolError."""
    return _decode(_client_messages, line)


def decode_server(line: bytes | str) -> ServerMessage | None:
    """A host's line as a message; None for a message type this version does not know."""
    try:
        return _decode(_server_messages, line)
    except ProtocolError as exc:
        if "does not match any of the expected tags" in str(exc):
            return None
        raise


def _decode(adapter: TypeAdapter, line: bytes | str):
    if len(line) > MAX_LINE:
        raise ProtocolError(f"a line of {len(line):,} bytes is longer than {MAX_LINE:,}")
    try:
        return adapter.validate_json(line)
    except ValueError as exc:
        raise ProtocolError(" ".join(str(exc).split())[:300]) from None


class Connection(Protocol):
    """One client's side of an attachment, over the socket or in memory."""

    async def send(self, message: ClientMessage) -> None:
        """Send a request; raises ConnectionError when the host is gone."""

    def messages(self) -> AsyncIterator[ServerMessage]:
        """The host's messages in order; ends when the connection closes."""

    async def aclose(self) -> None:
        """Leave; the agent goes on."""

