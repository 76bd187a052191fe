"""A long conversation opens on its newest page; older turns are read a page at
a time as the person scrolls up, and a link to an old turn reads that turn."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from playwright.sync_api import expect

from noema.interfaces.web.chat_routes import HISTORY_PAGE
from noema.interfaces.web.history import history_page
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.paths import AgentPaths

from .conftest import LiveServer, screenshot

TURNS = 1_000
CALL = 950  # a tool call whose result (951) is in the newest page and the call in the page before
SIZES = {"desk": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


def fill(path: Path, turns: int) -> None:
    store = TurnStore(path)
    try:
        with store.transaction():
            for n in range(1, turns + 1):
                if n == CALL:
                    store.append(NewTurn(TurnKind.TOOL_CALL, tool_name="file_read", call_id="c1",
                                         arguments='{"path": "notes/boat.md"}'))
                elif n == CALL + 1:
                    store.append(NewTurn(TurnKind.TOOL_RESULT, "the sail is blue",
                                         tool_name="file_read", call_id="c1"))
                elif n % 2:
                    store.append(NewTurn(TurnKind.USER, f"Question {n}: and the sail?",
                                         channel="web"))
                else:
                    store.append(NewTurn(TurnKind.ASSISTANT, f"Answer {n}: the **sail**, again."))
    finally:
        store.close()


# -- the pages the server reads ------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("pages") / "turns.db"
    fill(path, 40)
    store = TurnStore(path)
    yield store
    store.close()


@settings(max_examples=200, deadline=None)
@given(after=st.integers(0, 45), span=st.one_of(st.none(), st.integers(1, 50)),
       limit=st.integers(1, 60), oldest=st.booleans())
def test_a_page_is_the_newest_or_oldest_of_its_range_and_says_whether_more_is_left(
        store, after, span, limit, oldest):
    before = None if span is None else after + span
    page = history_page(store, limit, after=after, before=before, oldest=oldest)
    in_range = [n for n in range(1, 41) if n > after and (before is None or n < before)]
    expected = in_range[:limit] if oldest else in_range[-limit:]
    assert [t["id"] for t in page.turns] == expected
    assert page.more == (len(in_range) > limit)


# -- the page a person reads ---------------------------------------------------


@pytest.fixture(scope="module")
def long_chat(tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    paths = AgentPaths.for_agent("ana", root / "home")
    paths.ensure()
    fill(paths.turns_db, TURNS)
    server = LiveServer(root)
    try:
        yield server
    finally:
        server.close()


def open_chat(browser, server: LiveServer, size: str, fragment: str = ""):
    context = browser.new_context(viewport=SIZES[size])
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server.address)
    expect(page.locator("#context")).not_to_have_text("")
    if fragment:
        page.goto(f"{server.base}/{fragment}")
    return context, page, errors


@pytest.mark.parametrize("size", SIZES)
def test_the_chat_opens_on_its_newest_turns_and_reads_older_ones_scrolling_up(
        browser, long_chat, size):
    context, page, errors = open_chat(browser, long_chat, size)
    try:
        log = page.locator("#log")
        newest = log.locator(f"#turn-{TURNS}")
        expect(newest).to_be_in_viewport()
        expect(log.locator(".turn")).to_have_count(HISTORY_PAGE)
        first_shown = TURNS - HISTORY_PAGE + 1
        mark = log.locator(".older")
        expect(mark).to_have_count(1)
        expect(mark).to_contain_text(f"{first_shown - 1:,} earlier turns")
        expect(log.locator(f"#turn-{first_shown - 1}")).to_have_count(0)
        # The result whose call is older than the page stands alone for now.
        expect(log.locator(f'[data-result="{CALL + 1}"]')).to_contain_text("Read a file")
        screenshot(page, f"chat-long-{size}", full_page=False)

        page.evaluate("window.scrollTo(0, 0)")
        older = log.locator(f"#turn-{first_shown - HISTORY_PAGE}")
        expect(older).to_have_count(1)
        expect(log.locator(".turn")).to_have_count(2 * HISTORY_PAGE - 1)  # 950 and 951: one line
        # The call was read: one line holds the call and its result again.
        line = log.locator(f"#turn-{CALL}")
        expect(line).to_have_attribute("data-result", str(CALL + 1))
        expect(log.locator(f'[data-result="{CALL + 1}"]')).to_have_count(1)
        # The person keeps their place: what was at the top is still on the screen.
        expect(log.locator(f"#turn-{first_shown + 1}")).to_be_in_viewport()
        expect(mark).to_contain_text(f"{first_shown - HISTORY_PAGE - 1:,} earlier turns")
        screenshot(page, f"chat-long-older-{size}", full_page=False)
    finally:
        context.close()
    assert not errors, errors


@pytest.mark.parametrize("size", SIZES)
def test_a_link_to_an_old_turn_reads_it_and_reads_on_from_there(browser, long_chat, size):
    context, page, errors = open_chat(browser, long_chat, size, "#turn-300")
    try:
        log = page.locator("#log")
        target = log.locator("#turn-300")
        expect(target).to_be_in_viewport()
        expect(target).to_have_class("turn assistant focus")
        # Read from a few turns before it on; marks stand for what lies above and below.
        island_end = 295 + HISTORY_PAGE - 1
        below = log.locator(f'.older[data-from="oldest"][data-after="{island_end}"]')
        newest_page = TURNS - HISTORY_PAGE + 1
        expect(below).to_contain_text(
            f"{newest_page - island_end - 1:,} later turns (#{island_end + 1}–#{newest_page - 1})")
        expect(log.locator('.older[data-from="newest"][data-after="0"]')).to_have_count(1)
        screenshot(page, f"chat-linked-{size}", full_page=False)

        # Scrolled down to the mark below (or "Show more" pressed), the next page is read
        # above the mark, so what the person was reading stays where it was.
        above = log.locator(f"#turn-{island_end}")
        expect(below.get_by_role("button", name="Show more")).to_be_visible()
        page.evaluate(f"document.getElementById('turn-{island_end}').scrollIntoView()")
        top = above.bounding_box()["y"]
        expect(log.locator(f"#turn-{island_end + HISTORY_PAGE}")).to_have_count(1)
        assert above.bounding_box()["y"] == top
        expect(log.locator('.older[data-from="oldest"]')).to_contain_text(
            f"(#{island_end + HISTORY_PAGE + 1}–#{newest_page - 1})")

        # A link into the mark above: the first turns, and no mark left above them.
        page.evaluate("location.hash = '#turn-3'")
        expect(log.locator("#turn-3")).to_be_in_viewport()
        expect(log.locator("#turn-1")).to_have_count(1)
        expect(log.locator('.older[data-after="0"]')).to_have_count(0)
        expect(target).not_to_have_class("turn assistant focus")

        # The memory page's turn links here.
        page.goto(f"{long_chat.base}/memory/turn/500")
        page.get_by_role("link", name="See it in the chat").click()
        expect(log.locator("#turn-500")).to_be_in_viewport()
    finally:
        context.close()
    assert not errors, errors
