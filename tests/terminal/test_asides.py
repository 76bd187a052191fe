"""The program's own notices (log lines) in the chat: never inside an answer.

A warning logged while an answer streams (a workspace snapshot that failed,
say) used to be written straight to the terminal between two words of the
answer. It now waits for the answer's end on a plain screen, and is printed
above the live block on a rich one; the answer itself is never cut.
"""

from __future__ import annotations

import io
import logging
import threading

from rich.console import Console

from noema import logs
from noema.interfaces.terminal.screen import PlainScreen, RichScreen


def test_an_aside_while_an_answer_streams_waits_for_its_end():
    out = io.StringIO()
    screen = PlainScreen(out)
    screen.answer("Still ")
    screen.aside("noema: warning: the snapshot failed")
    screen.answer("here.")
    assert "Still here." in out.getvalue() and "snapshot" not in out.getvalue()
    screen.end_answer()
    assert out.getvalue() == "noema> Still here.\nnoema: warning: the snapshot failed\n"


def test_an_aside_at_the_prompt_is_its_own_line_and_the_prompt_comes_back():
    out = io.StringIO()
    screen = PlainScreen(out)
    screen.ready()
    screen.aside("noema: warning: late")
    assert out.getvalue() == "you> \nnoema: warning: late\nyou> "


def test_a_rich_aside_does_not_end_the_answer_being_written():
    out = io.StringIO()
    screen = RichScreen(Console(file=out, force_terminal=False, width=80))
    screen.answer("First paragraph.\n\nStill ")
    screen.aside("noema: warning: the snapshot failed")
    assert screen.pending == "Still "  # the live block goes on
    screen.answer("here.")
    screen.end_answer()
    text = out.getvalue()
    assert "Still here." in text and text.index("snapshot") < text.index("Still here.")


def test_log_lines_from_any_thread_go_where_the_chat_says_while_it_runs(tmp_path):
    err = io.StringIO()
    logs.setup(tmp_path / "noema.log", terminal=err)
    shown: list[str] = []
    try:
        with logs.terminal_lines(shown.append):
            worker = threading.Thread(target=logging.getLogger("noema.x").warning,
                                      args=("from a thread",))
            worker.start()
            worker.join()
            logging.getLogger("noema.x").info("only in the file")
        logging.getLogger("noema.x").warning("after the chat")
    finally:
        logs.setup(None)
    assert shown == ["noema: warning: from a thread"]
    assert err.getvalue() == "noema: warning: after the chat\n"
    written = (tmp_path / "noema.log").read_text()
    assert "from a thread" in written and "only in the file" in written
