"""The senses page: a sensor silenced from the page, its events counted and
plotted, then started again; the archive searched."""

from __future__ import annotations

import asyncio
import re

from playwright.sync_api import expect

from .conftest import screenshot


def test_a_silenced_sensor_s_events_are_plotted_and_searchable(page, live):
    page.goto(f"{live.base}/senses")
    row = page.locator('tr[data-channel="applog"]')
    expect(row.locator(".state")).to_have_text("active")
    row.locator("select").select_option("15m")
    row.get_by_role("button", name="Silence").click()
    expect(page.locator("#outcome")).to_contain_text("applog is silenced until")
    page.reload()
    expect(row.locator(".state")).to_contain_text("silenced until")

    with live.log.open("a") as log:
        for n in range(5):
            log.write(f"ERROR disk quota nearly full on volume{n}\n")

    async def archived() -> None:
        archive = live.app.pipeline.archive
        while (counts := archive.counts().get("applog")) is None or counts.stored < 5:
            await asyncio.sleep(0.05)

    live.call(archived())
    page.reload()
    plot = page.locator('figure.plot[data-channel="applog"]')
    expect(plot.locator("figcaption")).to_contain_text("5 events")
    expect(plot.locator("canvas")).to_have_count(1)
    expect(row.locator("td").nth(3)).to_have_text("5")
    screenshot(page, "senses")

    page.fill("#q", "quota volume3")
    page.click("form.search button")
    hits = page.locator(".hits li")
    expect(hits.first).to_contain_text("ERROR disk quota nearly full on volume3")
    hits.first.locator("a.batch").click()
    expect(page.locator("h1")).to_contain_text("Archive batch b")
    expect(page.locator(".muted").first).to_contain_text("arrived while the channel was silenced")
    expect(page.locator(".events li")).to_have_count(5)
    page.go_back()

    row.get_by_role("button", name="Start").click()
    expect(page.locator("#outcome")).to_contain_text("applog is active again.")
    page.reload()
    expect(row.locator(".state")).to_have_text("active")
    assert not live.app.agent.status().busy  # nothing was delivered: no cycle ran


def test_silencing_an_unknown_channel_is_refused_with_its_reason(live):
    import httpx


    with httpx.Client(base_url=live.base, cookies={live.server.credentials.cookie: live.server.credentials.session}) as c:
        response = c.post("/api/senses/silence", json={"channel": "nope", "duration": "5m"},
                          headers={"x-csrf-token": live.server.credentials.csrf})
        assert response.status_code == 400 and "unknown channel" in response.json()["error"]
        response = c.post("/api/senses/silence", json={"channel": "applog", "duration": "soon"},
                          headers={"x-csrf-token": live.server.credentials.csrf})
        assert response.status_code == 400 and response.json()["error"]


def test_delivered_events_are_shown_live_apart_with_their_gap_and_archive_batch(page, live):
    from noema.providers.scripted import say

    live.script(say("Listening."), say("I see the temperature warnings."))
    page.fill("#message", "Tell me what the logs say.")
    page.press("#message", "Enter")
    expect(page.locator(".turn.assistant .body").last).to_have_text("Listening.")  # the stream is live
    live.idle()
    with live.log.open("a") as log:
        for n in range(12):
            log.write(f"WARN temperature high on rack{n}\n")

    # Shown as it is delivered: no reload, the history was read once at the start.
    delivered = page.locator("details.turn.event.delivery")
    expect(delivered).to_have_count(1)
    summary = delivered.locator("summary").first
    expect(summary).to_contain_text("Events delivered from applog")
    expect(summary).to_contain_text("10 left in the archive")
    expect(page.get_by_text("pool_event called")).to_have_count(0)  # its carrying call is not
    summary.click()
    package = delivered.locator('.package[data-channel="applog"]')
    expect(package.locator(".package-head")).to_contain_text("applog · aggregatable")
    expect(package.locator("pre.head")).to_contain_text("12 events like")
    expect(package.locator("pre.head")).to_contain_text("temperature high on rack")  # spaces
    expect(package.locator(".gap")).to_contain_text("… 10 more: batch b")
    expect(page.locator(".turn.assistant .body").last).to_have_text("I see the temperature warnings.")
    live.idle()
    screenshot(page, "chat-delivery")

    page.reload()  # the same delivery, read from the store, once
    expect(page.locator(".turn.assistant .body").last).to_have_text("I see the temperature warnings.")
    expect(page.locator("details.turn.event.delivery")).to_have_count(1)
    link = page.locator("details.turn.event.delivery .gap a.batch").first
    expect(link).to_have_attribute("href", re.compile(r"^/senses/batch/b\d+\?offset=\d+$"))
    page.locator("details.turn.event.delivery summary").first.click()
    link.click()
    expect(page.locator("h1")).to_contain_text("Archive batch b")
    expect(page.locator(".events li").first).to_contain_text("WARN temperature high on rack")
    screenshot(page, "senses-batch")


def test_script_in_a_delivered_event_runs_nothing(page, live):
    from noema.providers.scripted import say

    live.script(say("Noted."))
    attack = '<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2">'
    page.fill("#message", "Watch the log.")
    page.press("#message", "Enter")
    expect(page.locator(".turn.assistant .body").last).to_have_text("Noted.")
    live.idle()
    live.script(say("A strange line arrived."))
    with live.log.open("a") as log:
        log.write(f"ERROR sender={attack}\n")
    delivered = page.locator("details.turn.event.delivery").last
    expect(delivered).to_be_attached()
    delivered.locator("summary").first.click()
    expect(delivered.locator(".package pre").first).to_contain_text("<script>window.pwned = 1")
    expect(page.locator(".turn.assistant .body").last).to_have_text("A strange line arrived.")
    live.idle()
    assert page.evaluate("window.pwned") is None
    assert page.locator("main script, main img").count() == 0
