"""The chat page in Chromium against the real server: streaming, Stop,
approvals, and text that must never run."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from noema.memory.turns import Flag, TurnKind
from noema.providers.scripted import call, say

from .conftest import screenshot


def _send(page, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")


def test_an_answer_streams_in_and_is_shown_as_markdown(page, live):
    words = " ".join(f"word{i}" for i in range(60))
    live.script(say(f"Here is **the answer**: {words} and the end."))
    _send(page, "What is the answer?")
    expect(page.locator(".turn.user .body").last).to_have_text("What is the answer?")
    streaming = page.locator(".turn.streaming")
    expect(streaming).to_contain_text("word1")  # seen while it is being written
    expect(page.locator(".turn.assistant strong").last).to_have_text("the answer")
    expect(page.locator(".turn.assistant").last).to_contain_text("and the end.")
    expect(streaming).to_have_count(0)
    live.idle()
    screenshot(page, "chat")


def test_stop_mid_stream_cancels_and_the_history_stays_valid(page, live):
    words = " ".join(f"long{i}" for i in range(2000))  # 40 s at the scripted pace
    live.script(say(words), say("Fine, stopping there."))
    _send(page, "Tell me everything.")
    expect(page.locator(".turn.streaming")).to_contain_text("long5")
    expect(page.locator("#stop")).to_be_enabled()
    page.click("#stop")
    expect(page.locator(".line.outcome.stopped")).to_be_visible()
    expect(page.locator("#stop")).to_be_disabled()
    shown = page.locator(".turn.assistant").last.inner_text()
    assert "long1999" not in shown
    live.idle()
    # The conversation goes on: the next message is answered.
    _send(page, "Thanks.")
    expect(page.locator(".turn.assistant .body").last).to_have_text("Fine, stopping there.")
    live.idle()
    turns = live.app.store.range(1, live.app.store.last_id())
    stored = [t for t in turns if t.kind is TurnKind.ASSISTANT and t.content.startswith("long")]
    assert stored and "long1999" not in stored[-1].content  # what was said is kept, not more
    assert turns[-1].content == "Fine, stopping there."
    screenshot(page, "chat-stopped")


def test_a_model_repeating_one_call_is_stopped_and_the_page_says_why(page, live):
    (live.workspace / "same.txt").write_text("the same line\n")
    same = say("", call("file_read", path="same.txt"))
    live.script(same, same, same, same)
    _send(page, "Loop, please.")
    outcome = page.locator(".line.outcome.repeating")
    expect(outcome).to_have_text("Stopped: the model kept making the same call.")
    live.idle()
    results = [t for t in live.app.store.range(1, live.app.store.last_id())
               if t.kind is TurnKind.TOOL_RESULT]
    assert [r.content.startswith("Not run:") for r in results][-4:] == [False, False, True, True]
    assert [r.has(Flag.ERROR) for r in results][-4:] == [False, False, True, True]
    screenshot(page, "chat-repeating", full_page=False)


def test_an_approval_granted_runs_the_tool(page, live):
    live.script(say("", call("file_write", path="granted.txt", content="yes")), say("Written."))
    _send(page, "Write granted.txt please.")
    card = page.locator(".approval")
    expect(card).to_contain_text("file_write")
    expect(card.locator(".path")).to_have_text("granted.txt · new file")
    screenshot(page, "chat-approval")
    card.get_by_role("button", name="Allow").click()
    expect(page.locator(".line.approved")).to_be_visible()
    expect(card).to_have_count(0)
    expect(page.locator(".turn.assistant .body").last).to_have_text("Written.")
    live.idle()
    assert (live.workspace / "granted.txt").read_text() == "yes"


def test_an_approval_refused_does_not_run_the_tool(page, live):
    live.script(say("", call("file_write", path="refused.txt", content="no")), say("Understood."))
    _send(page, "Write refused.txt please.")
    card = page.locator(".approval")
    expect(card).to_contain_text("file_write")
    card.get_by_role("button", name="Refuse").click()
    expect(page.locator(".line.refused")).to_be_visible()
    expect(page.locator(".turn.assistant .body").last).to_have_text("Understood.")
    live.idle()
    assert not (live.workspace / "refused.txt").exists()


def test_script_in_model_and_world_text_runs_nothing(page, live):
    attack = ('<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2">'
              '[click](javascript:window.pwned=3)')
    (live.workspace).mkdir(exist_ok=True)
    (live.workspace / "page.html").write_text(f"fetched: {attack}")
    live.script(say(f"Model says {attack}", call("file_read", path="page.html")),
                say(f"And again {attack}"))
    _send(page, f"Person says {attack}")
    expect(page.locator(".turn.assistant").last).to_contain_text("And again <script>")
    result = page.locator("details.turn.tool").last
    result.locator("summary").click()
    expect(result).to_contain_text('fetched: <script>window.pwned = 1</script>')
    expect(page.locator(".turn.user").last).to_contain_text("<img src=")
    live.idle()
    page.reload()  # the same turns, now from the stored history
    expect(page.locator(".turn.assistant").last).to_contain_text("And again <script>")
    assert page.evaluate("window.pwned") is None
    assert page.locator("main script, main img, main a[href^='javascript']").count() == 0
    screenshot(page, "chat-escaped")


def test_the_context_use_is_shown(page, live):
    expect(page.locator("#context")).to_have_text(re.compile(r"context [\d,]+ / [\d,]+ tokens"))


def test_a_safe_cancellation_greys_the_discarded_answer(page, live):
    words = " ".join(f"draft{i}" for i in range(2000))
    live.script(say(words), say("Both questions, answered together."))
    _send(page, "First question.")
    expect(page.locator(".turn.streaming")).to_contain_text("draft3")
    _send(page, "Actually, a second one.")  # nothing ran yet: the cycle is cancelled safely
    expect(page.locator(".line.outcome.cancelled_safe")).to_contain_text("discarded")
    expect(page.locator(".turn.discarded")).to_contain_text("draft3")
    expect(page.locator(".turn.assistant:not(.discarded) .body").last).to_have_text(
        "Both questions, answered together.")
    live.idle()
    screenshot(page, "chat-cancelled-safe")
