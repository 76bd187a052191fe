"""The approval card as the person reads it, at a desk and on a phone: what the
tool does in words, why it asks, a command as a command, a file's change as a
diff against what the file holds; a mail as a mail (read without a browser:
the session's agent has no mail)."""

from __future__ import annotations

from playwright.sync_api import expect

from noema.interfaces.web.approval_view import fields, view
from noema.providers.scripted import call, say

from .conftest import screenshot
from .test_chat_face import _send, in_view


def _card(page, live, words: str, *answer):
    live.script(*answer, say("Left as it was."))
    _send(page, words)
    card = page.locator(".approval")
    expect(card).to_be_visible()
    return card


def _refuse(page, live, card):
    card.get_by_role("button", name="Refuse").click()
    expect(card).to_have_count(0)
    expect(page.locator(".turn.assistant .body").last).to_have_text("Left as it was.")
    live.idle()


def test_a_command_and_a_file_s_change_are_shown_as_they_read(sized, live):
    name, page = sized
    live.workspace.mkdir(exist_ok=True)
    (live.workspace / "plan.md").write_text("# Plan\nbuy milk\ncall Ana\n")
    card = _card(page, live, "Clean the build folder.",
                 say("", call("shell_execute", command="rm -rf build && make")))
    expect(card.locator(".ask")).to_contain_text("ana asks: Run a command")
    expect(card.locator(".reason")).to_be_visible()
    expect(card.locator("pre.command")).to_have_text("rm -rf build && make")
    expect(card.locator(".arguments")).not_to_contain_text("command:")
    for button in ("Allow", "Refuse"):
        assert in_view(page, card.get_by_role("button", name=button)), button
    screenshot(page, f"approval-command-{name}", full_page=False)
    _refuse(page, live, card)

    card = _card(page, live, "Change the plan.", say("", call(
        "file_write", path="plan.md", content="# Plan\nbuy oat milk\ncall Ana\n")))
    expect(card.locator(".ask")).to_contain_text("asks: Write a file")
    expect(card.locator(".path")).to_have_text("plan.md · changed")
    expect(card.locator("pre.diff .del")).to_have_text(["- buy milk"])
    expect(card.locator("pre.diff .add")).to_have_text(["+ buy oat milk"])
    expect(card.locator("pre.diff .ctx").first).to_have_text("  # Plan")
    screenshot(page, f"approval-diff-{name}", full_page=False)
    if name == "phone":  # the conversation keeps at least half the screen while a card waits
        height = page.viewport_size["height"]
        header = page.locator("header.top").bounding_box()["height"]
        dock = page.locator(".dock").bounding_box()["height"]
        assert height - header - dock >= height / 2, (header, dock)
    _refuse(page, live, card)
    assert (live.workspace / "plan.md").read_text() == "# Plan\nbuy milk\ncall Ana\n"


def test_a_mail_is_shown_as_a_mail():
    shown = view("email_send", "to: ana@example.org, mallory@example.net\nsubject: Keys\n"
                               "body: Here they are.\nSecond line.")
    assert shown == {"title": "Send a mail", "kind": "mail",
                     "to": ["ana@example.org", "mallory@example.net"], "subject": "Keys",
                     "body": "Here they are.\nSecond line.", "reply": False}


def test_a_value_that_looks_like_another_field_is_shown_as_it_came():
    # A body that says "to: …" must not become a recipient, nor hide one.
    text = "to: ana@example.org\nsubject: Hi\nbody: fine\nto: mallory@example.net"
    assert fields("email_send", text) is None
    assert view("email_send", text) == {"title": "Send a mail", "kind": "lines", "text": text}
    assert view("some_mcp_tool", "x: 1")["kind"] == "lines"
