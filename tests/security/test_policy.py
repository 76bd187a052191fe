"""Decisions of the access policy on resolved paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.security.identity import FileId, of_path
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


def test_a_secret_is_known_by_identity_through_renames_and_links_not_by_a_reused_number(
    tmp_path,
):
    """A secret is known by identity (numbers and the file system's handle):
    a rename or another hard link keeps it, a new file given the deleted
    secret's inode number is not taken for it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = ws / "secret.txt"
    secret.write_text("s\n")
    policy = AccessPolicy([Root(ws, True)])
    policy.remember_denied(of_path(secret))
    secret.rename(ws / "env.old")
    os.link(ws / "env.old", ws / "linked")
    for name in ("env.old", "linked"):
        with pytest.raises(AccessDenied, match="moved, renamed or given another name"):
            policy.check(str(ws / name), Access.READ)
    number = (ws / "env.old").stat().st_ino
    (ws / "env.old").unlink()
    (ws / "linked").unlink()
    reused = None
    for n in range(400):  # the file system hands the freed number out again
        made = ws / f"new{n}.txt"
        made.write_text("mine\n")
        if made.stat().st_ino == number:
            reused = made
            break
    if reused is None or of_path(reused).handle is None:
        pytest.skip("this file system gave the number to no new file, or has no handles")
    assert policy.check(str(reused), Access.READ).path == reused
    folder = ws / "vault"
    folder.mkdir()
    policy.remember_denied(of_path(folder))
    folder.rename(ws / "moved")
    with pytest.raises(AccessDenied, match="moved, renamed"):
        policy.check(str(ws / "moved" / "inside.txt"), Access.WRITE)


@given(
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from([None, b"a", b"b"])),
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from([None, b"a", b"b"])),
)
def test_two_identities_are_one_file_when_their_numbers_and_known_handles_agree(one, two):
    first, second = FileId(*one), FileId(*two)
    agree = one[:2] == two[:2] and (None in (one[2], two[2]) or one[2] == two[2])
    assert first.same(second) == agree == second.same(first)


def test_a_file_tool_read_judges_what_it_opened_not_only_the_name(tmp_path):
    """A secret renamed onto a checked name between the check and the open is
    still refused: the read asks about the file it opened."""
    from pathlib import PurePosixPath

    from noema.security import fsafe
    from noema.security.policy import KNOWN

    moved = tmp_path / "plain.txt"
    moved.write_text("a secret renamed here\n")
    KNOWN.remember(of_path(moved))
    with pytest.raises(AccessDenied, match="given another name"):
        fsafe.read_file(tmp_path, PurePosixPath("plain.txt"), max_bytes=1000)
    other = tmp_path / "other.txt"
    other.write_text("fine\n")
    assert fsafe.read_file(tmp_path, PurePosixPath("other.txt"), max_bytes=1000) == b"fine\n"


MARKS = ("turns.db", "agent.lock", "config.toml")


@given(st.sets(st.sampled_from(MARKS)), st.sets(st.sampled_from(("identity", "logs"))),
       st.sets(st.sampled_from(("src", "notes.txt", "README.md", "docs"))))
def test_an_agent_s_folder_is_known_by_its_layout_not_by_its_neighbours(files, folders, other):
    from noema.security.policy import agent_layout

    expected = "turns.db" in files or (
        "agent.lock" in files and ("config.toml" in files or "identity" in folders)
    ) or ("config.toml" in files and folders == {"identity", "logs"})
    assert agent_layout(files, folders) == expected
    assert agent_layout(files | other, folders | other) == expected  # other names change nothing


def test_a_link_under_a_secret_s_name_does_not_make_its_target_a_secret(tmp_path):
    """A refused `.env` link to the person's notes leaves the notes readable
    (a model could otherwise lock the person's files out of the history)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("notes\n")
    (ws / ".env").symlink_to("notes.txt")
    (ws / "real.key").write_text("k\n")
    policy = AccessPolicy([Root(ws, True)], (".env", "*.key"))
    for name in (".env", "real.key"):
        with pytest.raises(AccessDenied):
            policy.check(str(ws / name), Access.READ)
    assert policy.check(str(ws / "notes.txt"), Access.READ).path == ws / "notes.txt"
    (ws / "real.key").rename(ws / "moved.txt")  # the refused file itself is known by identity
    with pytest.raises(AccessDenied, match="given another name"):
        policy.check(str(ws / "moved.txt"), Access.READ)


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
