"""The chat as a person sees it, in Chromium: formatting while an answer is
written, the kept answer after Stop, one line per tool call, a header that
says what the agent does, and approvals that stay in view, whole.

Every moment of a stream is watched from inside the page (a mutation
observer records the streaming bubble's visible text after each change), so
"no raw Markdown on screen" is checked at every piece, not only at the end.
"""

from __future__ import annotations

import asyncio
import functools
import threading

import pytest
from playwright.sync_api import expect

from noema.app import build_app
from noema.config import Config
from noema.interfaces.web import UiServer
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, call, say
from noema.security.settings import FilesSettings, RootSettings

from .conftest import WAIT, screenshot

ANSWER = ("## A plan for **the whole weekend**\n\nFirst `make coffee` then read "
          "[the tide tables](https://tides.example/vigo) and *walk along the beach*.\n\n"
          "- pack a towel\n- pack *two* sandwiches\n\n```python\nprint('ready')\n```\n\nDone.")

WATCH = """() => {
  window.__shots = [];
  new MutationObserver(() => {
    const node = document.querySelector('.turn.streaming .body');
    if (node) window.__shots.push(node.innerText);
  }).observe(document.getElementById('log'), {subtree: true, childList: true,
                                              characterData: true});
}"""


def _send(page, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")


def in_view(page, locator) -> bool:
    box = locator.bounding_box()
    size = page.viewport_size
    return (box is not None and box["y"] >= 0 and box["x"] >= 0
            and box["y"] + box["height"] <= size["height"]
            and box["x"] + box["width"] <= size["width"])


def test_no_markdown_marker_is_ever_on_screen_while_an_answer_is_written(page, live):
    page.evaluate(WATCH)
    live.script(say(ANSWER))
    _send(page, "Plan my weekend.")
    expect(page.locator("#doing")).to_have_text("writing…")
    answer = page.locator(".turn.assistant").last
    expect(answer.locator("h2")).to_have_text("A plan for the whole weekend")
    live.idle()
    expect(page.locator("#doing")).to_have_text("idle")
    shots = page.evaluate("window.__shots")
    assert len(shots) > 10, "the stream was not seen piece by piece"
    for shot in shots:
        for marker in ("##", "**", "`", "](", "```"):
            assert marker not in shot, f"{marker!r} was on screen: {shot!r}"
    assert any("the whole" in shot and "weekend" not in shot for shot in shots)  # mid-bold
    body = answer.locator(".body")
    expect(body.locator("strong")).to_have_text("the whole weekend")
    expect(body.locator("code").first).to_have_text("make coffee")
    expect(body.locator("li")).to_have_count(2)
    expect(body.locator("pre code")).to_contain_text("print('ready')")
    expect(answer.locator("button.copy")).to_have_count(1)
    expect(answer.locator(".meta")).to_contain_text("Noema")
    expect(page.locator(".turn.user").last.locator(".meta")).to_contain_text("You")
    screenshot(page, "face-chat-rendered")


def test_the_answer_kept_after_stop_is_rendered_and_no_internal_note_shows(page, live):
    words = " ".join(f"**point{i}** and more" for i in range(400))
    live.script(say(f"## Many points\n\n{words}"))
    _send(page, "Tell me everything.")
    streaming = page.locator(".turn.streaming")
    expect(streaming.locator("strong").nth(3)).to_have_text("point3")
    page.click("#stop")
    expect(page.locator(".line.outcome.stopped")).to_be_visible()
    kept = page.locator(".turn.assistant.interrupted").last
    expect(kept.locator("h2")).to_have_text("Many points")
    assert "**" not in kept.inner_text() and "##" not in kept.inner_text()
    live.idle()
    page.reload()
    page.wait_for_selector(".turn.assistant")
    stored = page.locator(".turn.assistant").last
    expect(stored.locator("h2")).to_have_text("Many points")
    expect(page.locator("#log")).not_to_contain_text("stopped you here")
    screenshot(page, "face-chat-after-stop")


def test_a_tool_call_is_one_line_naming_what_it_touched_and_how_it_went(page, live):
    (live.workspace).mkdir(exist_ok=True)
    (live.workspace / "notes.md").write_text("buy milk\n")
    live.script(say("", call("file_read", path="notes.md")),
                say("", call("file_read", path="missing.md")), say("Read them."))
    _send(page, "Read my notes.")
    expect(page.locator(".turn.assistant .body").last).to_have_text("Read them.")
    live.idle()
    lines = page.locator("details.turn.tool")  # the page may hold earlier tests' calls
    first = lines.filter(has_text="notes.md").last
    second = lines.filter(has_text="missing.md").last
    for touched in ("notes.md", "missing.md"):  # one line per call, not a call and a result
        expect(lines.filter(has_text=touched)).to_have_count(1)
    expect(first.locator("summary")).to_have_text("✓Read a filenotes.md")  # what it did, in words
    expect(first.locator(".tool-name")).to_have_attribute("title", "file_read")
    expect(second.locator("summary")).to_contain_text("✗")
    expect(second).to_have_class("turn tool failed")
    expect(first.locator("pre.result")).to_be_hidden()  # folded until opened
    first.locator("summary").click()
    expect(first.locator("pre.result")).to_contain_text("buy milk")
    expect(first.locator("pre.arguments")).to_contain_text('"path"')
    screenshot(page, "face-chat-tools")


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_an_approval_stays_in_view_whole_and_is_answered_by_keyboard(browser, live, size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(WAIT * 1000)
    try:
        page.goto(live.address)
        page.wait_for_selector("body[data-page]")
        for i in range(6):  # a long conversation: the newest message is far down
            live.script(say(f"Answer {i}. " + "words " * 80))
            _send(page, f"Question {i}.")
            expect(page.locator(".turn.assistant .body").last).to_contain_text(f"Answer {i}.")
            live.idle()
        tail = " && rm -rf ~/private"
        content = "line\n" * 5 + "x" * 1200 + tail + " r\u200bm"
        live.script(say("", call("file_write", path="long.txt", content=content)),
                    say("Not written, then."))
        _send(page, "Write the long file.")
        card = page.locator(".approval")
        expect(card).to_be_visible()
        expect(page.locator("#doing")).to_have_text("waiting for your approval")
        for button in ("Allow", "Refuse"):
            assert in_view(page, card.get_by_role("button", name=button)), button
        expect(card.locator(".ask")).to_contain_text("asks: Write a file")
        arguments = card.locator(".arguments")
        expect(arguments.locator(".path")).to_have_text("long.txt · new file")
        expect(arguments.locator("pre.diff .add").first).to_have_text("+ line")  # its new text
        expect(arguments).to_contain_text(tail)  # the end of a long value is shown
        expect(arguments).to_contain_text("r⟨U+200B⟩m")
        expect(arguments).not_to_contain_text('"path"')  # no JSON
        expect(card.locator(".hidden-warning")).to_be_visible()
        screenshot(page, f"face-approval-{size[0]}x{size[1]}", full_page=False)
        # A key answers a card on screen long enough to read, the text box left.
        expect(card).to_have_attribute("data-armed", "")
        page.locator("#message").blur()
        page.keyboard.press("Alt+n")
        expect(page.locator(".line.refused")).to_have_text("Refused on this page: nothing was run.")
        expect(card).to_have_count(0)
        expect(page.locator(".turn.assistant .body").last).to_have_text("Not written, then.")
        live.idle()
        assert not (live.workspace / "long.txt").exists()
    finally:
        context.close()


def test_an_empty_conversation_is_welcomed(browser, tmp_path):
    paths = AgentPaths.for_agent("nina", tmp_path / "home")
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = UiServer(paths, config, port=0,
                      build_app=functools.partial(build_app, provider=ScriptedProvider([])))
    try:
        address = asyncio.run_coroutine_threadsafe(server.start(), loop).result(WAIT)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        try:
            page = context.new_page()
            page.goto(address)
            welcome = page.locator("#welcome")
            expect(welcome).to_be_visible()
            expect(welcome).to_contain_text("Hello, this is nina")
            expect(welcome).to_contain_text("asks first")
            screenshot(page, "face-welcome")
        finally:
            context.close()
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(WAIT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
