"""Decisions of the access policy on resolved paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from noema.security.policy import Access, AccessDenied, AccessPolicy, Root


@pytest.fixture
def layout(tmp_path: Path):
    home = tmp_path / "home"
    (home / "docs" / "project").mkdir(parents=True)
    (home / "agent").mkdir()
    policy = AccessPolicy(
        [Root(home / "docs", False), Root(home / "docs" / "project", True)],
        deny=("*.pem", "private/*", f"{home}/docs/archive/*"),
        protected=(home / "agent",),
    )
    return home, policy


def test_workspace_is_the_first_read_write_root(layout):
    home, policy = layout
    assert policy.workspace.path == home / "docs" / "project"
    assert policy.check("a.txt", Access.WRITE).path == home / "docs" / "project" / "a.txt"


def test_innermost_root_decides_the_mode(layout):
    home, policy = layout
    assert policy.check(str(home / "docs" / "x.txt"), Access.READ).root.writable is False
    with pytest.raises(AccessDenied, match="read-only"):
        policy.check(str(home / "docs" / "x.txt"), Access.WRITE)
    assert policy.check(str(home / "docs" / "project" / "y"), Access.WRITE).root.writable


def test_deny_globs(layout):
    home, policy = layout
    for path in (
        "key.pem",
        "sub/deep/key.pem",
        "private/diary.txt",
        "private/a/b.txt",
        str(home / "docs" / "archive" / "old.txt"),
    ):
        with pytest.raises(AccessDenied, match="deny rule"):
            policy.check(path, Access.READ)
    # A relative rule is anchored at its root, not matched anywhere.
    assert policy.check("notes/private/diary.txt", Access.READ)


def test_missing_file_under_a_linked_folder_is_resolved(layout, tmp_path: Path):
    home, policy = layout
    (home / "docs" / "project" / "out").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(AccessDenied, match="outside"):
        policy.check("out/not/yet/there.txt", Access.WRITE)


def test_link_inside_the_roots_is_followed(layout):
    home, policy = layout
    (home / "docs" / "project" / "up").symlink_to(home / "docs", target_is_directory=True)
    target = policy.check("up/readme.md", Access.READ)
    assert target.path == home / "docs" / "readme.md" and not target.root.writable


def test_protected_folder_wins_over_roots(tmp_path: Path):
    policy = AccessPolicy([Root(tmp_path, True)], protected=(tmp_path / "agent",))
    with pytest.raises(AccessDenied, match="agent's own data"):
        policy.check("agent/turns.db", Access.READ)


def test_refusal_names_what_is_allowed(layout):
    home, policy = layout
    with pytest.raises(AccessDenied) as refused:
        policy.check("/etc/passwd", Access.READ)
    text = str(refused.value)
    assert f"{home / 'docs'} (read-only)" in text and "the workspace" in text and "*.pem" in text


def test_display_is_relative_in_the_workspace(layout):
    home, policy = layout
    assert policy.display(policy.check("a/b.txt", Access.READ)) == "a/b.txt"
    assert policy.display(home / "docs" / "x") == str(home / "docs" / "x")


def test_denial_is_pure(layout, tmp_path: Path):
    home, policy = layout
    ghost = home / "docs" / "project" / "never" / "created.txt"
    assert policy.denial(ghost, Access.WRITE) is None
    assert not ghost.parent.exists()
    assert "outside" in policy.denial(Path("/etc/passwd"), Access.READ)
    assert os.listdir(home / "docs" / "project") == []


# -- names git reads as its own, lengths, loops -------------------------------------


def test_git_names_are_refused_at_any_depth_in_any_root(layout):
    home, policy = layout
    for place in (home / "docs" / "a" / ".GIT" / "x", home / "docs" / "project" / "b" / "git~1"):
        for access in Access:
            reason = policy.denial(place, access)
            assert reason and "names git reads as .git" in reason, (place, access)


def test_a_gitmodules_link_is_refused_but_not_the_file(layout):
    home, policy = layout
    project = home / "docs" / "project"
    real = project / "real.txt"
    assert policy.denial(project / ".gitmodules", Access.WRITE) is None
    reason = policy.denial(real, Access.READ, lexical=project / ".gitmodules")
    assert reason and "symbolic link" in reason
    assert policy.denial(real, Access.READ, lexical=project / "alias.txt") is None


def test_length_limits_are_checked_in_bytes(layout):
    home, policy = layout
    policy.check("é" * 127, Access.WRITE)  # 254 bytes: a name the file system holds
    with pytest.raises(AccessDenied, match="256 bytes long"):
        policy.check("é" * 128, Access.WRITE)
    with pytest.raises(AccessDenied, match="a path holds at most 4095 bytes"):
        policy.check("d/" * 2100 + "f", Access.WRITE)


def test_a_loop_of_links_is_named(layout):
    home, policy = layout
    project = home / "docs" / "project"
    os.symlink("b", project / "a")
    os.symlink("a", project / "b")
    with pytest.raises(AccessDenied, match="leads back to itself"):
        policy.check("a/notes.txt", Access.READ)


def test_refusals_quote_long_paths_briefly(layout):
    home, policy = layout
    raw = "/elsewhere/" + "folder/" * 400 + "secret"
    with pytest.raises(AccessDenied) as refused:
        policy.check(raw, Access.READ)
    message = str(refused.value)
    assert "outside the folders you may use" in message and "…" in message
    assert "folder/" * 20 not in message


def test_a_reused_inode_number_is_not_taken_for_a_moved_secret(tmp_path):
    """A secret is known by identity after a rename of its folder; a new file
    that got a deleted secret's inode number has another change time."""
    ws = tmp_path / "ws"
    ws.mkdir()
    new = ws / "new.txt"
    new.write_text("mine\n")
    policy = AccessPolicy([Root(ws, True)])
    info = new.stat()
    policy.remember_denied(info.st_dev, info.st_ino, info.st_ctime_ns - 1)
    assert policy.check(str(new), Access.READ).path == new
    policy.remember_denied(info.st_dev, info.st_ino, info.st_ctime_ns)
    with pytest.raises(AccessDenied, match="moved or renamed"):
        policy.check(str(new), Access.READ)
    folder = ws / "vault"
    folder.mkdir()
    seen = folder.stat()
    policy.remember_denied(seen.st_dev, seen.st_ino)  # a folder: by number alone
    with pytest.raises(AccessDenied, match="moved or renamed"):
        policy.check(str(folder / "inside.txt"), Access.WRITE)


@pytest.mark.parametrize("name", ["notes\n.txt", "a\tb.md", "re\rport", "x\x1b[31m.txt",
                                  "folder\x7f/f", "c1\x85.txt"])
def test_a_name_with_a_control_character_is_refused_and_named(layout, name):
    home, policy = layout
    for access in (Access.WRITE, Access.READ):
        with pytest.raises(AccessDenied, match="control character") as refused:
            policy.check(name, access)
        assert "\n" not in str(refused.value)  # the message itself stays one line
    assert not list((home / "docs" / "project").iterdir())


def test_a_trailing_newline_is_trimmed_not_refused(layout):
    home, policy = layout
    assert policy.check("notes.txt\n", Access.WRITE).path == home / "docs" / "project" / "notes.txt"
