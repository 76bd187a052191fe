"""Streamed Markdown: blocks are rendered as soon as they are whole, the one
being written waits, and a code fence is never cut."""

from __future__ import annotations

import io

from rich.console import Console

from noema.interfaces.host.protocol import CycleStarted, TextDelta, TurnStored, TurnView
from noema.interfaces.terminal.client import ChatClient
from noema.interfaces.terminal.markdown import MarkdownStream
from noema.interfaces.terminal.screen import RichScreen

from .fakes import FakeConnection

ANSWER = ("Here is **the plan**:\n\n"
          "- first, `read` the file\n- then write it\n\n"
          "```python\nx = 1\n\n\ny = 2\n```\n\n"
          "Done.")


def pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def test_blocks_come_out_whole_whatever_the_pieces():
    for size in (1, 3, 7, len(ANSWER)):
        stream = MarkdownStream()
        blocks = [b for piece in pieces(ANSWER, size) for b in stream.feed(piece)]
        assert blocks == ["Here is **the plan**:", "- first, `read` the file\n- then write it",
                          "```python\nx = 1\n\n\ny = 2\n```"]
        assert stream.pending == "Done."
        assert stream.finish() == "Done." and stream.pending == ""


def test_an_unclosed_fence_holds_everything_until_the_end():
    stream = MarkdownStream()
    assert stream.feed("~~~\ncode\n\nmore\n\n") == []
    assert stream.feed("~~~\n\nafter\n\n") == ["~~~\ncode\n\nmore\n\n~~~", "after"]


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=60, color_system=None, force_terminal=False), out


def test_the_screen_renders_each_block_as_markdown_as_it_completes():
    rich, out = console()
    redraws: list[str] = []
    screen = RichScreen(rich)
    screen.on_change(lambda: redraws.append(screen.pending))
    for piece in pieces(ANSWER, 5):
        screen.answer(piece)
        if "the plan" in out.getvalue() and "read" not in out.getvalue():
            assert "**" not in out.getvalue()  # rendered, not raw
    shown = out.getvalue()
    assert "Here is the plan:" in shown
    assert "• first, read the file" in shown and "• then write it" in shown
    assert "x = 1" in shown and "y = 2" in shown and "```" not in shown
    assert "Done." not in shown and screen.pending == "Done."  # still being written
    assert "Done." in redraws  # and shown live meanwhile
    screen.end_answer()
    assert "Done." in out.getvalue() and screen.pending == ""


async def test_a_streamed_answer_reaches_the_rich_screen_through_the_client():
    rich, out = console()
    connection = FakeConnection()
    client = ChatClient(connection, RichScreen(rich))
    client.handle(CycleStarted(cycle_id=1, origin="person"))
    for piece in pieces("# Title\n\nSome *emphasis*.", 4):
        client.handle(TextDelta(delta=piece))
    client.handle(TurnStored(turn=TurnView(id=1, ts=0, kind="assistant", content="")))
    shown = out.getvalue()
    assert "Title" in shown and "# Title" not in shown
    assert "Some emphasis." in shown and "*" not in shown
    client.handle(TurnStored(turn=TurnView(id=2, ts=0, kind="tool_call", content="", tool_name="clock",
                                           arguments="{}")))
    assert "· clock({})" in out.getvalue()
