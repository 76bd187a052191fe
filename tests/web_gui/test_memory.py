"""The memory inspector: save points with their reports, citations opening
their turns in place, rejected attempts, search."""

from __future__ import annotations

from playwright.sync_api import expect

from noema.memory import savepoints
from noema.memory.savepoints import AttemptRecord, Report, Status
from noema.providers.scripted import say

from .conftest import screenshot


def _report(cited, attempts=()) -> Report:
    return Report(cited=tuple(cited), covered=1, coverable=1, chars=100, words=20, tokens=30,
                  retries=len(attempts), chronicler="scripted/script", language="en",
                  attempts=tuple(attempts))


def test_a_citation_opens_its_turn_in_place_and_reports_are_shown(page, live):
    live.script(say("A lighthouse keeper's boat, then."))
    page.fill("#message", "I want to name my boat after a lighthouse.")
    page.press("#message", "Enter")
    expect(page.locator(".turn.assistant .body").last).to_have_text("A lighthouse keeper's boat, then.")
    live.idle()
    store = live.app.store
    asked = next(t for t in reversed(store.range(1, store.last_id()))
                 if t.content == "I want to name my boat after a lighthouse.")

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
    opened = card.locator(".cited .turn.focus")
    expect(opened).to_contain_text("I want to name my boat after a lighthouse.")
    expect(card.locator(".cited .turn.focus")).to_have_count(1)
    expect(card.locator(f'.cited .turn[data-turn="{asked.id + 1}"]')).to_contain_text(
        "A lighthouse keeper's boat, then.")  # with its neighbours
    expect(link).to_have_attribute("aria-expanded", "true")
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


def test_search_finds_a_turn_and_links_to_it(page, live):
    live.script(say("Zanzibar is noted."))
    page.fill("#message", "Remember the word zanzibar.")
    page.press("#message", "Enter")
    expect(page.locator(".turn.assistant .body").last).to_have_text("Zanzibar is noted.")
    live.idle()
    page.goto(f"{live.base}/memory")
    page.fill("#q", "zanzibar")
    page.check("input[name=role][value=user]")
    page.click("form.search button")
    hits = page.locator(".hits li")
    expect(hits.first).to_contain_text("Remember the word «zanzibar».")  # the best first
    assert all(" user · " in text for text in hits.all_inner_texts())  # only the person's
    hits.first.locator("a").click()
    expect(page.locator(".turn.focus")).to_contain_text("Remember the word zanzibar.")
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
