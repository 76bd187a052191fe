"""The files page: versions in time order, a diff, restore and undo with the
CLI's guards and messages."""

from __future__ import annotations

from playwright.sync_api import expect

from noema.providers.scripted import call, say

from .conftest import screenshot


GIT_WORDS = ("diff --git", "index 0000000", "new file mode", "--- ", "+++ ", "@@", "Restore as in")


def test_a_version_is_diffed_as_read_restored_beside_it_and_undo_keeps_the_persons_edit(
        sized, live):
    name, page = sized
    path = f"notes-{name}.txt"
    live.script(say("", call("file_write", path=path, content="first line\n")),
                say("", call("file_search_and_replace", path=path, old_text="first",
                             new_text="second")),
                say("Both done."))
    page.fill("#message", f"Write {path}, then change it.")
    page.press("#message", "Enter")
    page.locator(".approval").get_by_role("button", name="Allow").click()
    expect(page.locator(".turn.assistant .body").last).to_have_text("Both done.")
    live.idle()
    assert (live.workspace / path).read_text() == "second line\n"

    page.goto(f"{live.base}/files")
    versions = page.locator(".version.agent")
    expect(versions.first).to_contain_text(path)
    expect(versions.first).to_contain_text(f"Replace text in a file: {path}")
    expect(page.locator(".workspace h2").first).to_have_text("ws")  # a name, not a long path
    for raw in GIT_WORDS:
        expect(page.locator("main")).not_to_contain_text(raw)
    screenshot(page, f"files-{name}", full_page=False)
    if name == "desk":
        screenshot(page, "files")

    versions.nth(0).locator("a.see-diff").click()
    change = page.locator(f'.file-change[data-path="{path}"]')
    expect(change.locator(".state")).to_have_text("changed")
    expect(change.locator(".line.removed .text")).to_have_text(["removed: first line"])
    expect(change.locator(".line.added .text")).to_have_text(["added: second line"])
    for raw in GIT_WORDS:
        expect(page.locator("main")).not_to_contain_text(raw)
    expect(change.get_by_role("button", name="Restore this file as it is here")).to_be_visible()
    expect(page.get_by_role("button", name="Undo the agent's last write")).to_be_visible()
    screenshot(page, f"files-diff-{name}", full_page=False)
    page.go_back()

    versions.nth(1).locator("a.see-diff").click()  # the first write: a new file
    change = page.locator(f'.file-change[data-path="{path}"]')
    expect(change.locator(".state")).to_have_text("new file")
    change.get_by_role("button", name="Restore this file as it is here").click()
    outcome = page.locator("#outcome")
    expect(outcome).to_contain_text(f"Restored {path} to version")
    expect(outcome).to_contain_text("The content it had before is kept in the history.")
    assert (live.workspace / path).read_text() == "first line\n"

    # The restore is the person's edit: undoing the agent's last write would undo it.
    page.click("#undo")
    expect(outcome).to_have_class("card error")
    assert (live.workspace / path).read_text() == "first line\n"
    page.goto(f"{live.base}/files")
    expect(page.locator(".version.person").first).to_contain_text(
        f"Restored {path} as an earlier version had it")


def test_an_unknown_version_is_named(page, live):
    page.goto(f"{live.base}/files/diff?version=deadbeef")
    expect(page.locator(".error")).to_contain_text("deadbeef")
