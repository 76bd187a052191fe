"""The approval card counts only an answer the person gave to it: a fresh key
press or a click once it has been on screen for half a second, with the
focus outside the text box; and the server applies an answer only to the
question it names."""

from __future__ import annotations

from playwright.sync_api import expect

from noema.providers.scripted import call, say

from .conftest import screenshot

# Installed before the card exists: the moment it is added, and 60 ms later,
# Alt+Y is pressed as a held key repeats it and as a quick hand would, and
# its Allow button is clicked.
EARLY = """
() => {
  window.early = [];
  const press = (repeat) => document.dispatchEvent(new KeyboardEvent("keydown",
      {key: "y", altKey: true, repeat, bubbles: true, cancelable: true}));
  new MutationObserver((changes, observer) => {
    const card = document.querySelector("#approvals .approval");
    if (!card) return;
    observer.disconnect();
    press(true);
    card.querySelector("button.allow").dispatchEvent(new MouseEvent("click", {bubbles: true}));
    window.early.push("drawn");
    setTimeout(() => { press(false); window.early.push("60 ms"); }, 60);
  }).observe(document.getElementById("approvals"), {childList: true});
}
"""


def _after_early(page) -> None:
    """Wait until both early presses were made (the page's policy forbids
    the string evaluation `wait_for_function` uses)."""
    for _ in range(400):
        if page.evaluate("() => window.early.length") == 2:
            return
        page.wait_for_timeout(50)
    raise AssertionError("the early presses were never made")


def _send(page, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")


def test_alt_y_answers_only_a_fresh_press_on_a_card_seen_with_the_text_box_left(page, live):
    live.script(say("", call("file_write", path="keys.txt", content="typed")), say("Written."))
    page.evaluate(EARLY)
    _send(page, "Write keys.txt please.")
    card = page.locator("#approvals .approval")
    expect(card).to_be_visible()
    expect(card.get_by_role("button", name="Allow")).to_be_disabled()  # just drawn
    screenshot(page, "approval-just-drawn", full_page=False)
    _after_early(page)

    # On screen long enough now, but the person is typing a message.
    expect(card).to_have_attribute("data-armed", "")
    expect(card.get_by_role("button", name="Allow")).to_be_enabled()
    page.focus("#message")
    page.keyboard.type("hello")
    page.keyboard.press("Alt+y")
    expect(page.locator("#message")).to_have_value("hello")  # the text box kept its focus
    # A held key's repeats, even on a card long on screen.
    page.evaluate("""() => document.dispatchEvent(new KeyboardEvent("keydown",
        {key: "y", altKey: true, repeat: true, bubbles: true}))""")
    page.wait_for_timeout(300)  # time for a wrong answer to be sent and settled
    expect(card).to_have_count(1)
    expect(page.locator(".line.approved")).to_have_count(0)
    assert not (live.workspace / "keys.txt").exists()
    screenshot(page, "approval-armed", full_page=False)

    # A fresh press, the focus outside the text box: that is an answer.
    page.locator("#message").blur()
    page.keyboard.press("Alt+y")
    expect(page.locator(".line.approved")).to_be_visible()
    expect(card).to_have_count(0)
    expect(page.locator(".turn.assistant .body").last).to_have_text("Written.")
    live.idle()
    assert (live.workspace / "keys.txt").read_text() == "typed"


def test_a_click_on_a_card_just_drawn_is_not_an_answer(page, live):
    live.script(say("", call("file_write", path="clicked.txt", content="no")), say("Left."))
    page.evaluate(EARLY)
    _send(page, "Write clicked.txt please.")
    card = page.locator("#approvals .approval")
    expect(card).to_be_visible()
    _after_early(page)
    page.wait_for_timeout(300)
    expect(page.locator(".line.approved")).to_have_count(0)
    expect(card).to_have_count(1)
    card.get_by_role("button", name="Refuse").click()  # waits until it is enabled
    expect(page.locator(".line.refused")).to_be_visible()
    live.idle()
    assert not (live.workspace / "clicked.txt").exists()


def test_the_server_applies_an_answer_only_to_an_open_question(page, live):
    answer = page.evaluate("""async () => {
        const {status, body} = await noema.post("/api/answer", {approval: 9999, allow: true});
        return {status, error: body.error};
    }""")
    assert answer["status"] == 409
    assert "approval 9999 is no longer open" in answer["error"]
