"""Token counts by a server's own tokenizer: the routes that give them, and
the gate that keeps a count from cutting a streamed answer short.

llama.cpp's server counts at `POST /tokenize`, its Python server at
`POST /extras/tokenize/count`; both live at the server's root, beside /v1.
The Python server also stops the answer it is generating whenever another
request arrives, so a count waits until no answer streams.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any


class Traffic:
    """Answers may stream together; a count waits for none to stream, and
    an answer waits for a count under way."""

    def __init__(self) -> None:
        self._answers = 0
        self._counting = False
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def answering(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._counting)
            self._answers += 1
        try:
            yield
        finally:
            async with self._changed:
                self._answers -= 1
                self._changed.notify_all()

    @contextlib.asynccontextmanager
    async def counting(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._counting and not self._answers)
            self._counting = True
        try:
            yield
        finally:
            async with self._changed:
                self._counting = False
                self._changed.notify_all()


@dataclass(frozen=True, slots=True)
class TokenizerRoute:
    """One server's tokenize route: where, what to send, where the count is."""

    path: str
    body: Callable[[str, str], dict[str, Any]]
    count: Callable[[Any], int | None]


def _count_field(answer: Any) -> int | None:
    value = answer.get("count") if isinstance(answer, dict) else None
    return value if isinstance(value, int) and value >= 0 else None


def _tokens_field(answer: Any) -> int | None:
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    return len(tokens) if isinstance(tokens, list) else None


# llama.cpp's Python server counts without sending the tokens back.
PYTHON_SERVER_ROUTE = TokenizerRoute(
    "/extras/tokenize/count", lambda text, model: {"input": text, "model": model}, _count_field)

TOKENIZER_ROUTES = (
    # llama.cpp's server: the text alone, without the special tokens a chat adds.
    TokenizerRoute("/tokenize", lambda text, model: {"content": text}, _tokens_field),
    PYTHON_SERVER_ROUTE,
)


def server_root(base_url: str) -> str:
    """`http://host:8080/v1` → `http://host:8080`: where a server's own routes are."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")
