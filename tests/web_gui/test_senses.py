"""The senses page: a sensor silenced from the page, its events counted and
plotted, then started again; the archive searched."""

from __future__ import annotations

import asyncio

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
    expect(plot.locator("rect.bar")).not_to_have_count(0)
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


    with httpx.Client(base_url=live.base, cookies={live.server.credentials.cookie: live.server.credentials.token}) as c:
        response = c.post("/api/senses/silence", json={"channel": "nope", "duration": "5m"},
                          headers={"x-csrf-token": live.server.credentials.csrf})
        assert response.status_code == 400 and "unknown channel" in response.json()["error"]
        response = c.post("/api/senses/silence", json={"channel": "applog", "duration": "soon"},
                          headers={"x-csrf-token": live.server.credentials.csrf})
        assert response.status_code == 400 and response.json()["error"]


def test_delivered_events_are_shown_apart_with_their_archive_batch(page, live):
    from noema.providers.scripted import say

    live.script(say("I see the disk warnings."))
    with live.log.open("a") as log:
        for n in range(12):
            log.write(f"WARN temperature high on rack{n}\n")
    expect(page.locator(".turn.assistant").last).to_have_text("I see the disk warnings.")
    page.reload()  # the delivery's turns are read from the store
    delivered = page.locator("details.turn.event")
    expect(delivered.first).to_be_visible()
    delivered.first.locator("summary").click()
    expect(delivered.first.locator("pre")).to_contain_text("12 events like")
    expect(delivered.first.locator("pre")).to_contain_text("10 more: batch b")
    link = delivered.first.locator(".archive-links a").first
    link.click()
    expect(page.locator(".events li").first).to_contain_text("WARN temperature high on rack")
    live.idle()
    screenshot(page, "senses-batch")
