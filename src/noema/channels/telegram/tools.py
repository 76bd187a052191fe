"""The model's Telegram tools: send a message, save a file the person sent.

`telegram_send` to a chat the person has never used (one not in
`[telegram] chat_ids`) asks the person first, even when the tool's autonomy
level is `allow`: a message to a stranger is how data would leave
(exfiltration guard). `telegram_save_file` is a versioned write under the
access policy, like `file_write`.
"""

from __future__ import annotations

from typing import Any

from ...memory.turns import sources_union
from ...security import fsafe
from ...security.approvals import ApprovalGate, ApprovalRequest, summarize
from ...security.history import ChangeNote
from ...security.policy import Access
from ...tools.hands import Hands
from ...tools.registry import Tool, ToolContext, ToolError, tool
from .library import BadRequest, Bot
from .sender import Sender
from .settings import TelegramSettings

GUARD = ("because the chat is not one of yours (not in [telegram] chat_ids), and a message "
         "there could carry your data out")


async def ask_first(gate: ApprovalGate, guarded: Tool, ctx: ToolContext,
                    arguments: dict[str, Any]) -> None:
    """Ask the person about this call whatever its autonomy level says
    (ToolError if they decline or cannot be asked)."""
    await gate.ask(ApprovalRequest(guarded.name, summarize(arguments), GUARD, ctx.call_id,
                                   ctx.turn_id, ctx.lead), ctx)


def telegram_tools(settings: TelegramSettings, bot: Bot | None, sender: Sender | None,
                   hands: Hands) -> list[Tool]:
    """The tools, bound to the bot; without a token they explain why they cannot run."""
    max_bytes = settings.max_file_mb * 1024 * 1024

    def ready() -> tuple[Bot, Sender]:
        if bot is None or sender is None:
            raise ToolError(f"Telegram has no bot token ({settings.token_secret} is not set "
                            "in secrets.toml or the environment), so nothing can be sent "
                            "or fetched; tell the person")
        return bot, sender

    @tool(side_effects=True, own_words=True)
    async def telegram_send(ctx: ToolContext, text: str, chat_id: int | None = None) -> str:
        """Send a message on Telegram. Your answer to a message the person sent on
        Telegram goes back there by itself; use this to write first (a reminder, a
        finished task) or to another chat. Markdown code and bold are kept.

        Args:
            text: The message; long texts are split into several messages.
            chat_id: The chat; by default the person's own. Another chat needs the
                person's approval.
        """
        _, sending = ready()
        chat = settings.chat_ids[0] if chat_id is None else chat_id
        if not text.strip():
            raise ToolError("the text is empty; there is nothing to send")
        if chat not in settings.chat_ids and gate_level(hands.gate) != "ask":
            await ask_first(hands.gate, guarded_send, ctx, {"chat_id": chat, "text": text})
        try:
            count = await sending.send(chat, text)
        except BadRequest as exc:
            raise ToolError(f"Telegram refused the message to chat {chat}: {exc}") from exc
        return f"Sent to Telegram chat {chat} ({count} message{'s' if count > 1 else ''})."

    @tool(side_effects=True, own_words=True)
    async def telegram_save_file(ctx: ToolContext, file_id: str, path: str) -> str:
        """Save a photo or file the person sent on Telegram into the workspace (a
        versioned write: the previous content, if any, can be restored).

        Args:
            file_id: The file_id shown with the attachment in the person's message.
            path: Where to save it; relative paths start in the workspace.
        """
        fetching, _ = ready()
        target = hands.policy.check(path, Access.WRITE)
        if str(target.relative) == ".":
            raise ToolError(f"{path} is a root folder; name the file to save")
        try:
            found = await fetching.get_file(file_id)
            if found.file_size is not None and found.file_size > max_bytes:
                raise ToolError(f"the file is {found.file_size} bytes, above the "
                                f"{settings.max_file_mb} MB limit ([telegram] max_file_mb)")
            data = bytes(await found.download_as_bytearray())
        except BadRequest as exc:
            raise ToolError(f"Telegram has no file {file_id!r} ({exc}); use the file_id "
                            "shown with the attachment") from exc
        if len(data) > max_bytes:
            raise ToolError(f"the file is {len(data)} bytes, above the {settings.max_file_mb} "
                            "MB limit ([telegram] max_file_mb)")
        # Nothing happened before this point; the write and its version are one step.
        store = hands.versions.store_for(target.root)
        note = ChangeNote("agent", f"saved a file sent on Telegram ({file_id})", ctx.turn_id,
                          "telegram_save_file")
        with store.change(note, [str(target.relative)]) as recorded:
            fsafe.atomic_write(target.root.path, target.relative, data)
        # A file a stranger's words pointed to (an id only outside words gave) is theirs.
        carried = ctx.words.carried({"file_id": file_id}) if ctx.words is not None else None
        hands.marks.mark(data, sources_union(ctx.lead, carried.sources if carried else ()),
                         str(target.path))
        version = (f"version {recorded.version.short}" if recorded.version
                   else "no new version (the same content was there)")
        return f"Saved {len(data)} bytes to {path} ({version})."

    guarded_send = telegram_send

    def gate_level(gate: ApprovalGate) -> str:
        return gate.level(guarded_send)

    return [telegram_send, telegram_save_file]
