"""The settings form: a value saved with the file's comments kept, a bad value
refused with the validator's message, a real call to test the model."""

from __future__ import annotations

from playwright.sync_api import expect

from .conftest import screenshot


def test_a_setting_is_saved_and_a_bad_value_shows_the_validation_message(page, live, tmp_path):
    script = tmp_path / "probe.toml"
    script.write_text('[[responses]]\ntext = "ready"\n')
    config = live.paths.config_file
    config.write_text("# chosen with care\n[cycle]\nmax_steps = 24  # a cycle's model calls\n\n"
                      f"[models.reasoning]\nprovider = \"scripted\"\nmodel = \"probe\"\n"
                      f"script = \"{script}\"\n")
    page.goto(f"{live.base}/settings")
    page.locator("#section-cycle summary").click()
    form = page.locator('form[data-key="cycle.max_steps"]')
    expect(form.locator("input")).to_have_value("24")
    form.locator("input").fill("30")
    form.get_by_role("button", name="Save").click()
    expect(form.locator(".outcome")).to_contain_text("cycle.max_steps saved")
    text = config.read_text()
    assert "max_steps = 30" in text and "# chosen with care" in text
    assert "# a cycle's model calls" in text

    form.locator("input").fill("0")
    form.get_by_role("button", name="Save").click()
    error = form.locator(".outcome.error")
    expect(error).to_contain_text("max_steps")
    expect(error).to_contain_text("greater than or equal to 1")
    assert "max_steps = 30" in config.read_text()  # the bad value was not written

    provider = page.locator('form[data-key="models.reasoning.provider"] select')
    expect(provider).to_have_value("scripted")  # chosen from the provider table
    expect(provider.locator("option[value=ollama]")).to_have_count(1)
    page.locator("button.test-model[data-role=reasoning]").click()
    expect(page.locator(".test-outcome")).to_contain_text("scripted/probe answered: ready")
    screenshot(page, "settings")


def test_a_secret_is_refused_from_the_form(page, live):
    page.goto(f"{live.base}/settings")
    form = page.locator('form[data-key="models.reasoning.base_url"]')
    form.locator("input").fill("sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789")
    form.get_by_role("button", name="Save").click()
    expect(form.locator(".outcome.error")).to_contain_text("secrets do not go in config.toml")
    config = live.paths.config_file
    assert not config.exists() or "sk-ant" not in config.read_text()


def test_the_rule_tester_names_the_rule_an_event_meets(page, live):
    config = live.paths.config_file
    before = config.read_text() if config.exists() else ""
    config.write_text(before + '\n[[reflexes.rules]]\nchannel = "log.*"\ntext = "ERROR"\n'
                      'urgency = "urgent"\n')
    try:
        page.goto(f"{live.base}/settings")
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
