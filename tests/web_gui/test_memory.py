"""The memory inspector: save points with their reports, citations opening
their turns in place, rejected attempts, search."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from noema.memory import savepoints
from noema.memory.savepoints import AttemptRecord, Report, Status
from noema.providers.scripted import say

from .conftest import screenshot


def _report(cited, attempts=()) -> Report:
    return Report(cited=tuple(cited), covered=1, coverable=1, chars=100, words=20, tokens=30,
                  retries=len(attempts), chronicler="scripted/script", language="en",
                  attempts=tuple(attempts))


def _exchange(page, live, message: str, answer: str, shows: str = ""):
    """The person says `message` (its line breaks typed with Shift+Enter), the
    scripted model answers `answer`; the person's stored turn."""
    live.script(say(answer))
    lines = message.split("\n")
    page.fill("#message", lines[0])
    for line in lines[1:]:
        page.press("#message", "Shift+Enter")
        page.type("#message", line)
    page.press("#message", "Enter")
    expect(page.locator(".turn.assistant").last).to_contain_text(shows or answer)
    live.idle()
    store = live.app.store
    return next(t for t in reversed(store.range(1, store.last_id())) if t.content == message)


def test_a_citation_opens_its_own_turn_first_whole_with_its_neighbours_folded(sized, live):
    name, page = sized
    _exchange(page, live, "Hello.", "Hello to you.")  # turns before it: it must still come first
    asked = _exchange(page, live, "I want to name my boat after a lighthouse.\nShort, please.\n"
                      "Two words at most.", "A lighthouse keeper's boat, then.")
    store = live.app.store

    async def write():
        savepoints.record(store, status=Status.REJECTED, previous=None, turn_ids=[asked.id],
                          text="", report=_report([], [AttemptRecord(
                              1, (("unknown_citation", "turn 999999 does not exist"),), 40, 0.1,
                              0.2, "The person <script>window.pwned=1</script> {cite:999999}")]))
        return savepoints.record(
            store, status=Status.ACCEPTED, previous=None, turn_ids=[asked.id, asked.id + 1],
            text=f"## The Journey\nThe person wants a **lighthouse** name {{cite:{asked.id}}}.",
            report=_report([asked.id]))

    accepted = live.call(write())

    async def pin_one():
        from noema.memory.observations import pin

        pin(store, asked.id, "the boat talk", "The person wants a <b>lighthouse</b> name.")

    live.call(pin_one())
    page.goto(f"{live.base}/memory")
    card = page.locator(f"#save-point-{accepted.id}")
    expect(card.locator(".journey strong")).to_have_text("lighthouse")
    link = card.locator(f'a[href="/memory/turn/{asked.id}"]')
    link.click()
    opened = card.locator(".cited > .turn").first  # its own turn first, not #N-3
    expect(opened).to_have_attribute("data-turn", str(asked.id))
    expect(opened).to_have_class(re.compile(r"\bfocus\b"))
    body = opened.locator(".body")
    assert body.inner_text() == asked.content  # whole, its line breaks kept
    expect(opened.locator(".muted")).to_contain_text(f"#{asked.id} · You · ")
    around = card.locator(".cited details.neighbours")
    expect(around).not_to_have_attribute("open", "")  # the neighbours folded…
    expect(around.locator("summary")).to_contain_text(re.compile(r"The \d turns around it \(#"))
    expect(around.locator(f'.turn[data-turn="{asked.id + 1}"]')).to_be_hidden()
    around.locator("summary").click()  # …and there when asked for
    expect(around.locator(f'.turn[data-turn="{asked.id + 1}"]')).to_contain_text(
        "A lighthouse keeper's boat, then.")
    expect(link).to_have_attribute("aria-expanded", "true")
    around.locator("summary").click()
    card.scroll_into_view_if_needed()
    screenshot(page, f"memory-cited-{name}", full_page=False)
    if name == "phone":
        return
    card.locator("summary", has_text="report").click()
    expect(card.locator("pre")).to_contain_text("coverage 100%")
    rejected = page.locator(".savepoint.rejected details.rejected")
    rejected.locator("summary").click()
    expect(rejected).to_contain_text("[unknown_citation] turn 999999 does not exist")
    expect(rejected).to_contain_text("<script>window.pwned=1</script>")
    assert page.evaluate("window.pwned") is None
    pinned = page.locator(".pinned li").last
    expect(pinned).to_contain_text("The person wants a <b>lighthouse</b> name.")  # as text
    expect(pinned.locator("a")).to_have_attribute("href", f"/memory/turn/{asked.id}")
    screenshot(page, "memory")

    page.goto(f"{live.base}/memory/turn/{asked.id}")  # the turn's own page: the same order
    first = page.locator("main .turn").first
    expect(first).to_have_attribute("data-turn", str(asked.id))
    assert first.inner_text().startswith(f"#{asked.id} · You · ")  # no blank lines of markup
    assert first.locator(".body").inner_text() == asked.content
    expect(page.locator("details.neighbours")).not_to_have_attribute("open", "")


def test_search_shows_text_with_its_matched_words_marked_and_filters_in_words(sized, live):
    name, page = sized
    word = f"zanzibar{name}"
    _exchange(page, live, f"Remember the word {word}.",
              f"**{word.title()}** is `noted`:\n\n| word | where |\n| --- | --- |\n"
              f"| {word} | the list |", shows=f"{word.title()} is noted")
    page.goto(f"{live.base}/memory")
    filters = page.locator("form.search fieldset label")
    expect(filters).to_have_text(["You", "ana", "Tools", "Events", "Notes"])
    page.fill("#q", word)
    page.click("form.search button")
    expect(page.locator("#results")).to_be_in_viewport()
    hits = page.locator(".hits li")
    expect(hits.first).to_be_visible()
    expect(page.locator("#results")).to_contain_text("ranked by")
    texts = hits.all_inner_texts()
    for text in texts:
        for raw in ("**", "`", "|", "«", "»", "---"):
            assert raw not in text, f"{raw!r} shown in {text!r}"
    expect(hits.locator("mark").first).to_have_text(re.compile(word, re.I))
    assert {"You", "ana"} <= {h.split(" · ")[0].split(" ", 1)[1] for h in texts}
    assert any(f"{word.title()} is noted: · word · where · {word} · the list" in t for t in texts)
    screenshot(page, f"memory-search-{name}", full_page=False)

    page.check("input[name=role][value=user]")  # only the person's words
    page.click("form.search button")
    expect(hits.first).to_contain_text(f"Remember the word {word}.")
    assert all(" You · " in text for text in hits.all_inner_texts())  # the person's words only
    hits.first.locator("a").click()
    expect(page.locator(".turn.focus")).to_contain_text(f"Remember the word {word}.")
    if name == "desk":
        screenshot(page, "memory-turn")


def test_an_unknown_kind_in_search_is_named(page, live):
    page.goto(f"{live.base}/memory?q=boat&role=robot")
    expect(page.locator(".error")).to_contain_text("unknown kind 'robot'")


def test_the_page_says_what_memory_is_writing_and_what_is_in_the_context(page, live):
    live.script(say("Noted."))
    page.fill("#message", "Remember the red boat.")
    page.press("#message", "Enter")
    expect(page.locator(".turn.assistant .body").last).to_have_text("Noted.")
    live.idle()
    store = live.app.store
    said = [t for t in store.range(1, store.last_id()) if t.content == "Remember the red boat."]

    async def refused_then_writing():
        from noema.memory.selection import Block

        savepoints.record(store, status=Status.REJECTED, previous=None,
                          turn_ids=[said[0].id], text="", report=_report([]))
        live.app.memory.activity.on_compaction_start(Block(tuple(said)), "asked")
        live.app.memory.activity.on_attempt_start(2, 3, 1, 400)

    live.call(refused_then_writing())
    page.goto(f"{live.base}/memory")
    expect(page.locator(".memory-now")).to_have_text(
        "Now: writing a save point of 1 turn, attempt 2 of 3.")
    expect(page.locator("#sp-title + p + p")).to_contain_text(
        "No save point is in the context now")

    async def done():
        live.app.memory.activity.block = None

    live.call(done())
