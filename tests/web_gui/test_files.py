"""The files page: versions in time order, a diff, restore and undo with the
CLI's guards and messages."""

from __future__ import annotations

from playwright.sync_api import expect

from noema.providers.scripted import call, say

from .conftest import screenshot


def test_a_version_is_diffed_and_restored_and_undo_keeps_the_persons_edit(page, live):
    live.script(say("", call("file_write", path="notes.txt", content="first line\n")),
                say("", call("file_search_and_replace", path="notes.txt", old_text="first",
                             new_text="second")),
                say("Both done."))
    page.fill("#message", "Write notes.txt, then change it.")
    page.press("#message", "Enter")
    page.locator(".approval").get_by_role("button", name="Allow").click()
    expect(page.locator(".turn.assistant .body").last).to_have_text("Both done.")
    live.idle()
    assert (live.workspace / "notes.txt").read_text() == "second line\n"

    page.goto(f"{live.base}/files")
    versions = page.locator(".version.agent")
    expect(versions.first).to_contain_text("notes.txt")
    newest, older = versions.nth(0), versions.nth(1)
    screenshot(page, "files")

    newest.locator("a.cite").click()
    expect(page.locator(".diff .added")).to_contain_text(["+second line"])
    expect(page.locator(".diff .removed")).to_contain_text(["-first line"])
    screenshot(page, "files-diff")
    page.go_back()

    older.locator("button.restore", has_text="Restore").first.click()
    outcome = page.locator("#outcome")
    expect(outcome).to_contain_text("Restored notes.txt to version")
    expect(outcome).to_contain_text("The content it had before is kept in the history.")
    assert (live.workspace / "notes.txt").read_text() == "first line\n"

    # The restore is the person's edit: undoing the agent's last write would undo it.
    page.click("#undo")
    expect(outcome).to_have_class("card error")
    assert (live.workspace / "notes.txt").read_text() == "first line\n"
    page.goto(f"{live.base}/files")
    expect(page.locator(".version.person").first).to_contain_text("Restore of notes.txt")


def test_an_unknown_version_is_named(page, live):
    page.goto(f"{live.base}/files/diff?version=deadbeef")
    expect(page.locator(".error")).to_contain_text("deadbeef")
