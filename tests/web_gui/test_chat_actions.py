"""What chat pages do, at a desk and on a phone: code in its language and
coloured, an answer copied, a question asked again and a message edited and
sent again, each saying it went as a new message (the store keeps every
message as it was)."""

from __future__ import annotations

from playwright.sync_api import expect

from noema.providers.scripted import say

from .conftest import screenshot
from .test_chat_face import _send

CODE = "Here it is:\n\n```python\ndef total(xs):\n    return sum(xs)  # <b>no tag</b>\n```\n"


def test_code_is_coloured_an_answer_copied_asked_again_and_a_message_edited(sized, live):
    name, page = sized
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.reload()
    assert page.evaluate(  # not loaded before a code block needs it
        "document.querySelector('pre[data-language]') !== null || typeof hljs === 'undefined'")
    question = f"Write a sum function ({name})."
    live.script(say(CODE))
    _send(page, question)
    answer = page.locator(".turn.assistant").last
    expect(answer.locator(".code-language")).to_have_text("python")
    code = answer.locator("pre code")
    expect(code.locator(".hljs-keyword").first).to_have_text("def")  # coloured by highlight.js
    expect(code).to_contain_text("<b>no tag</b>")  # the model's text stays text
    assert page.evaluate("document.querySelector('.turn.assistant:last-child pre b')") is None
    live.idle()
    screenshot(page, f"chat-code-{name}", full_page=False)

    answer.get_by_role("button", name="Copy", exact=True).last.click()
    assert page.evaluate("navigator.clipboard.readText()") == CODE  # the answer as written

    live.script(say("Again: def total(xs): return sum(xs)"))
    answer.get_by_role("button", name="Ask again").click()
    again = page.locator(".turn.user").last
    expect(again.locator(".body")).to_have_text(question)
    expect(again.locator(".meta")).to_contain_text("asked again — sent as a new message")
    expect(page.locator(".turn.assistant .body").last).to_have_text(
        "Again: def total(xs): return sum(xs)")
    live.idle()

    live.script(say("A product, then."))
    again.get_by_role("button", name="Edit").click()
    banner = page.locator("#editing")
    expect(banner).to_contain_text("it is sent as a new message; the one before stays as it was")
    expect(page.locator("#message")).to_have_value(question)
    page.fill("#message", "Write a product function.")
    screenshot(page, f"chat-editing-{name}", full_page=False)
    page.press("#message", "Enter")
    edited = page.locator(".turn.user").last
    expect(edited.locator(".body")).to_have_text("Write a product function.")
    expect(edited.locator(".meta")).to_contain_text("edited from #")
    expect(edited.locator(".meta")).to_contain_text("— sent as a new message")
    expect(banner).to_have_count(0)
    expect(page.locator(".turn.assistant .body").last).to_have_text("A product, then.")
    live.idle()
    store = live.app.store
    said = [t.content for t in store.range(1, store.last_id()) if t.kind.value == "user"]
    assert said[-3:] == [question, question, "Write a product function."]  # nothing rewritten
