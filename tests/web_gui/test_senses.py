"""The senses page at a desk and on a phone: each sensor in plain words beside
its nature, Silence only where a sensor can be silenced, the plots drawn by the
vendored chart library with a time axis, a count scale and whole marks; a
sensor silenced from the page, its events counted and plotted, then started
again; the archive searched; the urgency-rule tester."""

from __future__ import annotations

import asyncio
import re

import pytest
from playwright.sync_api import expect

from noema.interfaces.web.senses import rates
from noema.providers.scripted import say

from .conftest import WAIT, screenshot, sign_in

SCREENS = {"desk": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
GREEN_MARKS = """(channel) => {
  const canvas = document.querySelector(`figure.plot[data-channel="${channel}"] canvas`);
  const {width, height} = canvas;
  const pixels = canvas.getContext("2d").getImageData(0, 0, width, height).data;
  let count = 0, left = width, right = -1, top = height, bottom = -1;
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) {
    const i = (y * width + x) * 4;
    if (pixels[i] === 0x11 && pixels[i + 1] === 0x63 && pixels[i + 2] === 0x29 && pixels[i + 3] === 255) {
      count++; left = Math.min(left, x); right = Math.max(right, x);
      top = Math.min(top, y); bottom = Math.max(bottom, y);
    }
  }
  return {count, left, right, top, bottom, width, height, ratio: window.devicePixelRatio};
}"""


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, live):
    """A fresh page of the session's server at a desk's or a phone's size: (name, page)."""
    phone = request.param == "phone"
    context = browser.new_context(viewport=SCREENS[request.param], is_mobile=phone,
                                  has_touch=phone)
    page = context.new_page()
    page.set_default_timeout(WAIT * 1000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text)  # the chart library obeys the CSP
            if "Content Security Policy" in m.text else None)
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}")
            if r.status >= 400 and "/static/" in r.url else None)
    page.goto(live.address)
    try:
        yield request.param, page
    finally:
        context.close()
    assert not errors, f"the page failed: {errors}"


def test_senses_are_told_in_plain_words_and_only_what_can_be_silenced_offers_silence(
        screen, live):
    name, page = screen
    page.goto(f"{live.base}/senses")
    applog = page.locator('tr[data-channel="applog"]')
    expect(applog.locator(".nature")).to_contain_text("counted in windows")
    expect(applog.locator(".nature .term")).to_have_text("aggregatable")  # the term stays beside
    expect(page.locator('tr[data-channel="clock"] .nature')).to_contain_text("latest value only")
    scheduler = page.locator('tr[data-channel="scheduler.urgent"]')
    expect(scheduler.locator(".nature")).to_contain_text("each event one by one")
    expect(scheduler.locator(".urgency")).to_contain_text("interrupts whatever the agent is doing")
    # A schedule the agent set cannot be silenced: no Silence offered for it.
    expect(scheduler.get_by_role("button", name="Silence")).to_have_count(0)
    expect(scheduler.locator("select")).to_have_count(0)
    expect(scheduler.locator(".control")).to_have_text("always heard")
    expect(page.locator('tr[data-channel="clock"]').get_by_role("button", name="Silence")) \
        .to_have_count(1)
    screenshot(page, f"senses-sensors-{name}", full_page=False)


def test_the_rule_tester_names_the_rule_an_event_meets(page, live):
    config = live.paths.config_file
    before = config.read_text() if config.exists() else ""
    config.write_text(before + '\n[[reflexes.rules]]\nchannel = "log.*"\ntext = "ERROR"\n'
                      'urgency = "urgent"\n')
    try:
        page.goto(f"{live.base}/senses")
        page.fill("#r-channel", "log.web")
        page.fill("#r-text", "ERROR: the disk is full")
        page.click("#rule-test button")
        expect(page.locator("#rule-outcome")).to_contain_text("Rule 1")
        expect(page.locator("#rule-outcome")).to_contain_text("matches: urgent")
        page.fill("#r-text", "all is well")
        page.click("#rule-test button")
        expect(page.locator("#rule-outcome")).to_contain_text("No rule of 1 matches")
        page.fill("#r-channel", "Not A Channel!")
        page.click("#rule-test button")
        expect(page.locator("#rule-outcome.error")).to_contain_text("cannot be tested")
    finally:
        config.write_text(before)


def test_a_silenced_sensor_s_events_are_plotted_and_searchable(page, live):
    page.goto(f"{live.base}/senses")
    row = page.locator('tr[data-channel="applog"]')
    expect(row.locator(".state")).to_have_text("active")
    row.locator("select").select_option("15m")
    row.get_by_role("button", name="Silence").click()
    expect(page.locator("#outcome")).to_contain_text("applog is silenced until")
    page.reload()
    expect(row.locator(".state")).to_contain_text("silenced until")
    earlier = int(row.locator(".count").inner_text())  # other tests' events, if any
    plotted = sum(c.total for c in rates(live.paths.archive_db, live.paths.turns_db).channels
                  if c.channel == "applog")

    with live.log.open("a") as log:
        for n in range(5):
            log.write(f"ERROR disk quota nearly full on volume{n}\n")

    async def archived() -> None:
        archive = live.app.pipeline.archive
        while (counts := archive.counts().get("applog")) is None or counts.stored < earlier + 5:
            await asyncio.sleep(0.05)

    live.call(archived())
    page.reload()
    plot = page.locator('figure.plot[data-channel="applog"]')
    expect(plot.locator("figcaption")).to_contain_text(f"{plotted + 5} events")
    expect(plot.locator("canvas")).to_have_count(1)
    expect(row.locator(".count")).to_have_text(str(earlier + 5))
    screenshot(page, "senses")

    page.fill("#q", "quota volume3")
    page.click("form.search button")
    expect(page.locator("#archive-results")).to_be_in_viewport()  # not left at the top
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


    cookies, csrf = sign_in(live.server.credentials)
    with httpx.Client(base_url=live.base, cookies=cookies) as c:
        response = c.post("/api/senses/silence", json={"channel": "nope", "duration": "5m"},
                          headers=csrf)
        assert response.status_code == 400 and "unknown channel" in response.json()["error"]
        response = c.post("/api/senses/silence", json={"channel": "applog", "duration": "soon"},
                          headers=csrf)
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


# Last: its deliveries would show in the chat tests above.
def test_a_plot_has_a_time_axis_a_count_scale_and_whole_marks(screen, live):
    name, page = screen
    live.idle()
    before = len(rates(live.paths.archive_db, live.paths.turns_db).deliveries)
    live.script(say("I read the disk warnings."))
    with live.log.open("a") as log:
        for n in range(7):
            log.write(f"WARN disk {n} is slow\n")

    async def delivered() -> None:  # the events reached the model: a delivery to mark
        while len(rates(live.paths.archive_db, live.paths.turns_db).deliveries) <= before:
            await asyncio.sleep(0.1)

    live.call(delivered())
    live.idle()
    page.goto(f"{live.base}/senses")
    plot = page.locator('figure.plot[data-channel="applog"]')
    expect(plot.locator("canvas")).to_have_count(1)  # drawn by uPlot, from the package
    expect(plot).to_have_attribute("data-x-ticks", re.compile(r"\d{1,2}:\d{2}"))
    expect(plot).to_have_attribute("data-y-ticks", re.compile(r"^0 \| "))
    x_ticks = plot.get_attribute("data-x-ticks").split(" | ")
    y_ticks = plot.get_attribute("data-y-ticks").split(" | ")
    assert len(x_ticks) >= 3, x_ticks  # an hour, told in times of day
    assert all(re.fullmatch(r"\d+", t) for t in y_ticks) and len(y_ticks) >= 2, y_ticks
    marks = page.evaluate(GREEN_MARKS, "applog")
    whole = 8 * marks["ratio"]  # a mark is 10 css pixels wide: its solid part at least 8
    assert marks["count"] >= 20, marks
    assert marks["right"] - marks["left"] + 1 >= whole, marks
    assert 0 < marks["left"] and marks["right"] < marks["width"] - 1, marks  # not cut at an edge
    assert 0 < marks["top"] and marks["bottom"] < marks["height"] - 1, marks
    legend = plot.locator(".legend")
    expect(legend).to_contain_text(re.compile(r"\d+ events this hour · busiest minute \d\d:\d\d "
                                              r"\(\d+\) · ▲ \d+ delivered · ▼ \d+ cancelled"))
    expect(legend).not_to_contain_text("—")
    # The plot comes first, the table of sensors after it.
    assert page.locator("figure.plot").first.bounding_box()["y"] < \
        page.locator("table.sensors").bounding_box()["y"]
    plot.scroll_into_view_if_needed()
    screenshot(page, f"senses-plot-{name}", full_page=False)
