"""The Telegram sensor: long polling for the person's messages.

It runs under the hub like any sense (restarted with backoff if it crashes).
A message from one of the person's chats is the person speaking: it goes
through the person's path (`Desk.submit`, a turn of the conversation, like a
typed line), not through the untrusted envelope that carries what the world
reports. A message the person *forwards* from someone else is that
someone's words: it is emitted as an event in the original sender's name
(outside data, never the person's authority), in its place in the burst,
and the person's own messages around it stay theirs. Messages from any
other chat are counted and dropped: they never reach the model.

A burst of short messages (people type in several sends) becomes one message
to the agent: each chat's messages wait until it has been quiet for
`quiet_window_s`, or at most `max_hold_s` while they keep coming, and are
then joined in order. They wait in the state file, not in memory, so a
crash while they wait loses nothing.

A forwarded message's event is exactly-once: its row waits in the state
file until a start finds the bookmark, saved with the event, past it.

`/stop` and `/status` act at once: whatever the chat sent before them is
given to the agent first, then the command runs and its answer is sent. A
command is recorded as taken before it runs: after a crash it is not run
again (stopping a cycle the person never meant to stop would be worse).

Network trouble is retried with growing pauses and told to the person once
when it lasts; a wrong token is told once and then tried only rarely.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from ...perception.events import Nature, SensorInfo
from ...perception.hub import Backoff, Bookmark, Emitter
from ..base import Desk
from .connection import trouble
from .incoming import Incoming, forwarded_text, incoming, runs, utterance
from .library import Bot, Update
from .approvals import TelegramApprovals
from .sender import Sender
from .settings import TelegramSettings
from .state import Batch, TelegramState

log = logging.getLogger(__name__)

CHANNEL = "telegram"
TOKEN_RETRY_S = 900.0  # a refused token is tried again this rarely
TELL_AFTER = 5  # consecutive network failures before the person is told
START_TEXT = "Noema here. Write to me; /stop stops what I am doing, /status tells what it is."


@dataclass
class Health:
    """How the connection stands, for `view()`."""

    state: str = "connecting"
    problem: str = ""
    failures: int = 0
    told: set[str] = field(default_factory=set)  # trouble kinds already told


class Poller:
    """The sensor that reads the person's chats (see the module's docstring)."""

    def __init__(self, settings: TelegramSettings, state: TelegramState, bot: Bot,
                 sender: Sender, notice: Callable[[str], None], *,
                 backoff: Backoff = Backoff(initial=1.0, maximum=60.0),
                 approvals: TelegramApprovals | None = None,
                 bookmark: Bookmark | None = None) -> None:
        self.settings = settings
        self.state = state
        self.bot = bot
        self.sender = sender
        self.notice = notice
        self.backoff = backoff
        self.approvals = approvals
        self.health = Health()
        self.desk: Desk | None = None
        # Where the forwarded messages' events stand: the archive's, else the state file's.
        self._forwarded_mark = bookmark or _StateMark(state, "forwarded")
        self._emit: Emitter | None = None
        self.info = SensorInfo(
            CHANNEL,
            "The person's Telegram chats. Their messages arrive as the person's own turns "
            "(a burst joined into one); a message they forward from someone else arrives as "
            "an event in that someone's name; messages from other chats are ignored and "
            "counted.",
            Nature.MERGEABLE, can_silence=False,
            parameters={"chats": len(settings.chat_ids),
                        "quiet_window_s": settings.quiet_window_s},
            words_of="telegram",
        )
        self._chats = frozenset(settings.chat_ids)
        self._due: dict[int, tuple[float, float]] = {}  # chat → (first, latest) arrival
        self._wake = asyncio.Event()
        self._retry_unsettled = False
        self._side: set[asyncio.Task[None]] = set()
        self._commands: dict[str, Callable[[Incoming], Awaitable[str]]] = {
            "stop": self._stop, "status": self._status, "start": self._start,
        }

    # -- the agent's side --------------------------------------------------------

    def attach(self, desk: Desk) -> None:
        """Take the desk and settle what a crash left between the state file and
        the conversation (called before the sensor runs)."""
        self.desk = desk
        self.settle()

    def settle(self) -> None:
        """Batches written but not known to be taken: find them in the
        conversation, or submit them now."""
        assert self.desk is not None
        unsettled = self.state.unsettled()
        if not unsettled:
            self._retry_unsettled = False
            return
        recent = self.desk.submitted(CHANNEL)
        for batch in unsettled:
            taken = [t for t in recent if t.sender == str(batch.chat_id)
                     and t.content == batch.text and t.id > batch.after_turn]
            if taken:
                self.state.settle(batch, taken[0].id)
            elif not self._submit(batch):
                return
        self._retry_unsettled = False

    def _submit(self, batch: Batch) -> bool:
        assert self.desk is not None
        try:
            turn = self.desk.submit(batch.text, channel=CHANNEL, sender=str(batch.chat_id))
        except Exception as exc:  # a full disk: the batch waits in the state file
            log.warning("the agent could not take a Telegram message: %s", exc)
            if "refused" not in self.health.told:
                self.health.told.add("refused")
                self.notice(f"a Telegram message could not be taken ({exc}); it is kept and "
                            "tried again shortly")
            self._retry_unsettled = True
            return False
        self.health.told.discard("refused")
        self.state.settle(batch, turn.id)
        self._side_task(self.bot.send_chat_action(batch.chat_id, "typing"))
        return True

    # -- the sensor ---------------------------------------------------------------

    async def run(self, emit: Emitter) -> None:
        """Poll and hand over until cancelled."""
        self._emit = emit
        self._emit_forwarded(self.state.forwarded(self._forwarded_after()))  # owed from before
        now = asyncio.get_running_loop().time()
        for chat in self.state.pending():  # taken before a restart: they waited enough
            self._due[chat] = (now - self.settings.max_hold_s, now)
        flusher = asyncio.create_task(self._flush_loop(), name="telegram:flush")
        try:
            await self._poll_loop()
        finally:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            for task in list(self._side):
                task.cancel()

    async def _poll_loop(self) -> None:
        while True:
            try:
                await self.bot.initialize()
                updates = await self.bot.get_updates(
                    offset=self.state.offset or None, timeout=self.settings.poll_timeout_s,
                    allowed_updates=["message", "callback_query"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._trouble(exc)
                continue
            self._recovered()
            for update in updates:
                await self._take(update)

    async def _take(self, update: Update) -> None:
        if update.callback_query is not None:  # a button of an approval question
            self.state.take(update.update_id, [], [])
            query = update.callback_query
            if self.approvals is not None:
                self._side_task(self.approvals.press(
                    query.id, query.data or "", query.from_user.id if query.from_user else None,
                    query.message.chat.id if query.message else None))
            return
        message = update.message
        if message is None:  # an edit, a reaction…: nothing the person said anew
            self.state.take(update.update_id, [], [])
            return
        if message.chat.id not in self._chats:
            self.state.take(update.update_id, [], [message.chat.id])
            log.info("ignored a Telegram message from chat %s (not the person's)",
                     message.chat.id)
            return
        item = incoming(update.update_id, message, self._chats)
        command = self._commands.get(item.command or "")
        if command is None and not utterance([item]).strip():
            self.state.take(update.update_id, [], [])  # a sticker, a location: no words
            return
        self.state.take(update.update_id, [] if command else [item], [])
        if command is None:
            now = asyncio.get_running_loop().time()
            first, _ = self._due.get(item.chat_id, (now, now))
            self._due[item.chat_id] = (first, now)
            self._wake.set()
            return
        self._flush(item.chat_id)  # what came before the command goes first
        try:
            reply = await command(item)
            await self.sender.send(item.chat_id, reply)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("answering /%s on Telegram failed: %s", item.command, exc)

    # -- commands -------------------------------------------------------------

    async def _stop(self, item: Incoming) -> str:
        assert self.desk is not None
        stopped = await self.desk.stop()
        return "Stopped." if stopped else "Nothing was running."

    async def _status(self, item: Incoming) -> str:
        assert self.desk is not None
        return self.desk.status() or "(no status)"

    async def _start(self, item: Incoming) -> str:
        return START_TEXT

    # -- the quiet window ------------------------------------------------------

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()
            if self._retry_unsettled:
                self.settle()
            now = loop.time()
            deadlines = {chat: min(latest + self.settings.quiet_window_s,
                                   first + self.settings.max_hold_s)
                         for chat, (first, latest) in self._due.items()}
            for chat, deadline in deadlines.items():
                if deadline <= now:
                    self._flush(chat)
            waits = [d - now for c, d in deadlines.items() if c in self._due]
            if self._retry_unsettled:
                waits.append(self.backoff.initial)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(waits) if waits else None)

    def _flush(self, chat: int) -> None:
        """Give the agent what `chat` sent and is still waiting: the person's words
        as one message, what they forwarded as events."""
        self._due.pop(chat, None)
        if self._retry_unsettled:
            self.settle()
            if self._retry_unsettled:  # an older batch must go first; this one waits
                now = asyncio.get_running_loop().time()
                self._due[chat] = (now, now)
                return
        waiting = self.state.pending().get(chat)
        if not waiting:
            return
        # In the order they came: the person's own messages joined into one, and
        # each run of forwarded ones emitted as the events of their writers.
        for own, run in runs(waiting):
            if own:
                if not self._submit(self.state.open_batch(
                        chat, utterance(run), [m.update_id for m in run])):
                    now = asyncio.get_running_loop().time()
                    self._due[chat] = (now, now)  # the rest waits behind it
                    return
            else:
                self.state.forward_out(run)
                self._emit_forwarded(run)

    # -- forwarded messages -----------------------------------------------------

    def _forwarded_after(self) -> int:
        return int((self._forwarded_mark.load() or {}).get("update", 0))

    def _emit_forwarded(self, messages: list[Incoming]) -> None:
        """Emit forwarded messages as outside events, each in its writer's name."""
        if not messages or self._emit is None:
            return
        for message in messages:
            # Saved before the emit: the archive commits both in one transaction.
            self._forwarded_mark.save({"update": max(message.update_id,
                                                     self._forwarded_after())})
            self._emit(forwarded_text(message), sender=message.origin[:300],
                       key=f"forwarded:{message.update_id}", occurred_at=message.date,
                       payload={"chat_id": message.chat_id, "update_id": message.update_id,
                                "forwarded_by_the_person": True,
                                "origin": message.origin[:300]})
        log.info("%d message(s) the person forwarded on Telegram became events in their "
                 "writers' names", len(messages))

    # -- trouble ---------------------------------------------------------------

    async def _trouble(self, exc: Exception) -> None:
        found = trouble(exc, self.settings.token_secret, self.bot.token)
        if found is None:
            raise exc  # a bug: the hub reports it and restarts the sensor
        self.health.failures += 1
        if found.kind == "token":
            wait = TOKEN_RETRY_S
        elif found.kind == "wait" and found.wait_s is not None:
            wait = found.wait_s
        else:
            wait = self.backoff.delay(self.health.failures)
        self.health.state = ("wrong token" if found.kind == "token"
                             else f"retrying in {wait:.0f} s")
        self.health.problem = found.sentence
        tell = found.kind in ("token", "conflict") or self.health.failures >= TELL_AFTER
        if tell and found.kind not in self.health.told:
            self.health.told.add(found.kind)
            self.notice(found.sentence if found.kind != "network"
                        else f"{found.sentence}; retrying quietly")
            log.warning("%s", found.sentence)
        else:
            log.info("Telegram poll failed (%s); again in %.1f s", found.sentence, wait)
        await asyncio.sleep(wait)

    def _recovered(self) -> None:
        if self.health.failures and "network" in self.health.told:
            self.notice("Telegram is reachable again")
        self.health = Health(state="connected", told=self.health.told - {"network"})

    def _side_task(self, work: Awaitable[object]) -> None:
        async def quietly() -> None:
            with contextlib.suppress(Exception):
                await work

        task = asyncio.get_running_loop().create_task(quietly())
        self._side.add(task)
        task.add_done_callback(self._side.discard)


class _StateMark:
    """A bookmark kept in the channel's state file, saved at once (when the
    sensory archive keeps none: the senses off)."""

    def __init__(self, state: TelegramState, name: str) -> None:
        self._state = state
        self._name = name

    def load(self) -> dict[str, object] | None:
        return self._state.load_mark(self._name)

    def save(self, state: Mapping[str, object]) -> None:
        self._state.save_mark(self._name, state)
