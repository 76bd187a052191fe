"""Escapes through the file tools. Each test attempts one, then checks that it
was refused and that the secret was not read / the outside world did not change."""

from __future__ import annotations

import os

import pytest

from noema.security.policy import AccessPolicy

from .world import AGENT_SECRET, OUTSIDE_SECRET, PERSON_GIT, World, tree_snapshot


def refused(result) -> None:
    assert result.is_error, result.content
    assert OUTSIDE_SECRET not in result.content
    assert AGENT_SECRET not in result.content


# -- reading what is not allowed -------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "./././../outside/./secret.txt",
        "notes.txt/../../outside/secret.txt",
    ],
)
async def test_traversal_reads_are_refused(world: World, path: str):
    result = await world.call("file_read", path=path)
    refused(result)
    assert "outside the folders you may use" in result.content
    assert str(world.ws) in result.content  # the refusal says what is allowed


async def test_absolute_path_outside_is_refused(world: World):
    refused(await world.call("file_read", path=str(world.secret)))


async def test_home_tilde_outside_is_refused(world: World, monkeypatch):
    monkeypatch.setenv("HOME", str(world.outside))
    refused(await world.call("file_read", path="~/secret.txt"))


async def test_proc_self_root_is_refused(world: World):
    refused(await world.call("file_read", path=f"/proc/self/root{world.secret}"))


async def test_proc_self_cwd_is_refused(world: World, monkeypatch):
    monkeypatch.chdir(world.outside)
    refused(await world.call("file_read", path="/proc/self/cwd/secret.txt"))


async def test_proc_self_fd_is_refused(world: World):
    fd = os.open(world.secret, os.O_RDONLY)
    try:
        refused(await world.call("file_read", path=f"/proc/self/fd/{fd}"))
        refused(await world.call("file_read", path=f"/dev/fd/{fd}"))
    finally:
        os.close(fd)


async def test_symlinked_file_to_outside_is_refused(world: World):
    (world.ws / "innocent.txt").symlink_to(world.secret)
    refused(await world.call("file_read", path="innocent.txt"))


async def test_relative_symlink_to_outside_is_refused(world: World):
    (world.ws / "rel.txt").symlink_to("../outside/secret.txt")
    refused(await world.call("file_read", path="rel.txt"))


async def test_symlinked_folder_to_outside_is_refused(world: World):
    (world.ws / "docs").symlink_to(world.outside, target_is_directory=True)
    refused(await world.call("file_read", path="docs/secret.txt"))


async def test_symlink_chain_to_outside_is_refused(world: World):
    (world.ws / "b").symlink_to(world.secret)
    (world.ws / "a").symlink_to(world.ws / "b")
    refused(await world.call("file_read", path="a"))


async def test_hard_link_to_outside_is_not_read(world: World):
    os.link(world.secret, world.ws / "hard.txt")
    result = await world.call("file_read", path="hard.txt")
    refused(result)
    assert "hard link" in result.content


async def test_agent_data_by_absolute_path_is_refused(world: World):
    result = await world.call("file_read", path=str(world.paths.root / "secrets.toml"))
    refused(result)


async def test_agent_data_inside_workspace_is_refused(inner_world: World):
    result = await inner_world.call("file_read", path=".noema/agents/t/secrets.toml")
    refused(result)
    assert "agent's own data" in result.content


async def test_another_agents_data_is_refused_too(inner_world: World):
    sibling = inner_world.paths.agents_dir / "other"
    sibling.mkdir()
    (sibling / "secrets.toml").write_text(f'key = "{AGENT_SECRET}"\n')
    result = await inner_world.call("file_read", path=".noema/agents/other/secrets.toml")
    refused(result)
    found = await inner_world.call("file_grep", query="SECRET", file_pattern="**/*.toml")
    assert AGENT_SECRET not in found.content


async def test_agent_data_through_a_symlink_is_refused(world: World):
    (world.ws / "cfg").symlink_to(world.paths.root, target_is_directory=True)
    refused(await world.call("file_read", path="cfg/secrets.toml"))


async def test_person_git_folder_is_not_read(world: World):
    result = await world.call("file_read", path=".git/config")
    assert result.is_error and "PERSON-GIT-CONFIG" not in result.content


async def test_nested_git_folder_is_not_read(world: World):
    (world.ws / "sub" / ".git").mkdir(parents=True)
    (world.ws / "sub" / ".git" / "config").write_text("NESTED-GIT\n")
    result = await world.call("file_read", path="sub/.git/config")
    assert result.is_error and "NESTED-GIT" not in result.content


@pytest.mark.parametrize("name", [".env", ".ssh/id_rsa", "server.pem", "deploy.key", ".env.local"])
async def test_secret_names_are_refused(world: World, name: str):
    path = world.ws / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("SECRET-IN-WORKSPACE\n")
    result = await world.call("file_read", path=name)
    assert result.is_error and "SECRET-IN-WORKSPACE" not in result.content
    assert "deny rule" in result.content


async def test_configured_deny_glob_is_refused(world: World):
    world.deny_extra = ("private/*",)
    (world.ws / "private").mkdir()
    (world.ws / "private" / "diary.txt").write_text("DIARY\n")
    result = await world.call("file_read", path="private/diary.txt")
    assert result.is_error and "DIARY" not in result.content


async def test_innocent_link_to_a_secret_name_is_refused(world: World):
    (world.ws / ".env").write_text("SECRET-IN-WORKSPACE\n")
    (world.ws / "readme-link.txt").symlink_to(world.ws / ".env")
    result = await world.call("file_read", path="readme-link.txt")
    assert result.is_error and "SECRET-IN-WORKSPACE" not in result.content


async def test_grep_does_not_reach_through_links(world: World):
    (world.ws / "docs").symlink_to(world.outside, target_is_directory=True)
    (world.ws / "s.txt").symlink_to(world.secret)
    os.link(world.secret, world.ws / "hard.txt")
    result = await world.call("file_grep", query="TOP-SECRET")
    assert OUTSIDE_SECRET not in result.content
    assert "No line matches" in result.content


async def test_find_does_not_list_outside(world: World):
    (world.ws / "docs").symlink_to(world.outside, target_is_directory=True)
    result = await world.call("file_find", pattern="**/secret.txt")
    assert result.content.startswith("No files or folders match")
    assert "docs/secret.txt" not in result.content and str(world.secret) not in result.content


async def test_find_pattern_with_parent_is_refused(world: World):
    result = await world.call("file_find", pattern="../outside/*")
    assert result.is_error and "secret" not in result.content


async def test_grep_pattern_with_parent_is_refused(world: World):
    result = await world.call("file_grep", query="TOP", file_pattern="../**")
    refused(result)


async def test_history_of_outside_path_is_refused(world: World):
    refused(await world.call("file_history", path=str(world.secret)))


async def test_nul_byte_path_is_refused(world: World):
    result = await world.call("file_read", path="notes.txt\x00../../outside/secret.txt")
    refused(result)


async def test_fifo_does_not_hang_the_agent(world: World):
    os.mkfifo(world.ws / "pipe")
    result = await world.call("file_read", path="pipe")
    assert result.is_error and "not a regular file" in result.content


async def test_oversized_file_is_not_read(world: World):
    (world.ws / "big.txt").write_text("x" * 2_000_000)
    result = await world.call("file_read", path="big.txt")
    assert result.is_error and "limit" in result.content and "xxxx" not in result.content


async def test_parent_swapped_after_check_is_refused(world: World, monkeypatch):
    """A folder checked as real, replaced by a link to the outside before the open."""
    (world.ws / "d").mkdir()
    (world.ws / "d" / "secret.txt").write_text("inside\n")
    original = AccessPolicy.check

    def check_then_swap(self, raw, access):
        target = original(self, raw, access)
        os.rename(world.ws / "d", world.ws / "d-old")
        (world.ws / "d").symlink_to(world.outside, target_is_directory=True)
        return target

    monkeypatch.setattr(AccessPolicy, "check", check_then_swap)
    result = await world.call("file_read", path="d/secret.txt")
    refused(result)
    assert "changed into a link" in result.content


# -- writing where it is not allowed ---------------------------------------------


async def _write_is_contained(world: World, **call) -> None:
    before = tree_snapshot(world.outside)
    agent_before = tree_snapshot(world.paths.root)
    name = call.pop("tool", "file_write")
    result = await world.call(name, **call)
    assert result.is_error, result.content
    assert tree_snapshot(world.outside) == before
    assert tree_snapshot(world.paths.root) == agent_before


async def test_write_by_traversal(world: World):
    await _write_is_contained(world, path="../outside/secret.txt", content="pwned")


async def test_write_new_file_outside_by_absolute_path(world: World):
    await _write_is_contained(world, path=str(world.outside / "new.txt"), content="pwned")


async def test_write_through_symlinked_folder(world: World):
    (world.ws / "docs").symlink_to(world.outside, target_is_directory=True)
    await _write_is_contained(world, path="docs/new.txt", content="pwned")


async def test_write_through_symlinked_file(world: World):
    (world.ws / "innocent.txt").symlink_to(world.secret)
    await _write_is_contained(world, path="innocent.txt", content="pwned")


async def test_write_through_dangling_symlink(world: World):
    (world.ws / "later.txt").symlink_to(world.outside / "created-by-agent.txt")
    await _write_is_contained(world, path="later.txt", content="pwned")


async def test_write_with_missing_parents_under_a_link(world: World):
    (world.ws / "docs").symlink_to(world.outside, target_is_directory=True)
    await _write_is_contained(world, path="docs/a/b/c.txt", content="pwned")


async def test_write_with_dotdot_after_missing_folder(world: World):
    await _write_is_contained(world, path="nothere/../../outside/x.txt", content="pwned")


async def test_write_by_proc_self_root(world: World):
    await _write_is_contained(world, path=f"/proc/self/root{world.secret}", content="pwned")


async def test_write_to_a_hard_link_leaves_the_outside_file_alone(world: World):
    os.link(world.secret, world.ws / "hard.txt")
    result = await world.call("file_write", path="hard.txt", content="pwned")
    # Either refused or the link is broken by the atomic rename: never written through.
    assert world.secret.read_text() == OUTSIDE_SECRET + "\n"
    if not result.is_error:
        assert (world.ws / "hard.txt").read_text() == "pwned"


async def test_replace_in_a_hard_link_is_refused(world: World):
    os.link(world.secret, world.ws / "hard.txt")
    await _write_is_contained(
        world, tool="file_search_and_replace", path="hard.txt", old_text="TOP", new_text="X"
    )


async def test_patch_outside_is_refused(world: World):
    await _write_is_contained(
        world,
        tool="file_patch",
        path=str(world.secret),
        unified_diff=f"@@ -1 +1 @@\n-{OUTSIDE_SECRET}\n+pwned\n",
    )


async def test_restore_outside_is_refused(world: World):
    await _write_is_contained(world, tool="file_restore", path=str(world.secret), version="HEAD")


async def test_mkdir_outside_is_refused(world: World):
    await _write_is_contained(world, tool="file_mkdir", path="../outside/newdir")


@pytest.mark.parametrize("path", [".git/config", ".git/hooks/post-commit", "sub/.git/HEAD"])
async def test_writes_into_git_folders_are_refused(world: World, path: str):
    before = tree_snapshot(world.ws / ".git")
    result = await world.call("file_write", path=path, content="#!/bin/sh\necho pwned\n")
    assert result.is_error
    assert tree_snapshot(world.ws / ".git") == before
    assert (world.ws / ".git" / "config").read_text() == PERSON_GIT
    assert not (world.ws / "sub").exists()


async def test_mkdir_in_git_folder_is_refused(world: World):
    result = await world.call("file_mkdir", path=".git/hooks")
    assert result.is_error and not (world.ws / ".git" / "hooks").exists()


async def test_write_through_a_link_to_git_folder(world: World):
    (world.ws / "gitlink").symlink_to(world.ws / ".git", target_is_directory=True)
    result = await world.call("file_write", path="gitlink/config", content="pwned")
    assert result.is_error and (world.ws / ".git" / "config").read_text() == PERSON_GIT


async def test_write_into_the_agent_history_is_refused(world: World):
    await world.call("file_write", path="a.txt", content="make the repository exist")
    hooks = world.gitdir() / "hooks" / "post-commit"
    await _write_is_contained(world, path=str(hooks), content="#!/bin/sh\necho pwned\n")
    assert not hooks.exists()


async def test_write_agent_secrets_is_refused(world: World):
    await _write_is_contained(world, path=str(world.paths.root / "secrets.toml"), content="x")


async def test_write_in_read_only_root_is_refused(world: World):
    from noema.security.settings import RootSettings

    world.extra_roots = (RootSettings(path=world.outside, mode="read-only"),)
    world.build()
    result = await world.call("file_read", path=str(world.secret))  # reading is allowed
    assert not result.is_error and OUTSIDE_SECRET in result.content
    before = tree_snapshot(world.outside)
    result = await world.call("file_write", path=str(world.secret), content="pwned")
    assert result.is_error and "read-only" in result.content
    assert tree_snapshot(world.outside) == before


async def test_write_of_a_secret_name_is_refused(world: World):
    result = await world.call("file_write", path=".env", content="API_KEY=planted")
    assert result.is_error and not (world.ws / ".env").exists()


async def test_write_above_the_size_limit_is_refused(world: World):
    result = await world.call("file_write", path="huge.txt", content="x" * 1_100_000)
    assert result.is_error and "limit" in result.content
    assert not (world.ws / "huge.txt").exists()


async def test_write_with_parent_swapped_after_check_is_refused(world: World, monkeypatch):
    (world.ws / "d").mkdir()
    original = AccessPolicy.check

    def check_then_swap(self, raw, access):
        target = original(self, raw, access)
        if raw == "d/new.txt":
            os.rename(world.ws / "d", world.ws / "d-old")
            (world.ws / "d").symlink_to(world.outside, target_is_directory=True)
        return target

    monkeypatch.setattr(AccessPolicy, "check", check_then_swap)
    before = tree_snapshot(world.outside)
    result = await world.call("file_write", path="d/new.txt", content="pwned")
    assert result.is_error and "changed into a link" in result.content
    assert tree_snapshot(world.outside) == before


async def test_write_over_a_file_swapped_for_a_link_after_check(world: World, monkeypatch):
    original = AccessPolicy.check

    def check_then_swap(self, raw, access):
        target = original(self, raw, access)
        if raw == "notes.txt":
            (world.ws / "notes.txt").unlink()
            (world.ws / "notes.txt").symlink_to(world.secret)
        return target

    monkeypatch.setattr(AccessPolicy, "check", check_then_swap)
    result = await world.call("file_write", path="notes.txt", content="pwned")
    assert world.secret.read_text() == OUTSIDE_SECRET + "\n"
    assert result.is_error


def test_root_inside_agent_data_is_rejected(world: World):
    from noema.security.settings import FilesSettings, RootSettings

    files = FilesSettings(roots=(RootSettings(path=world.paths.root / "x"),))
    with pytest.raises(ValueError, match="agent's own data"):
        AccessPolicy.from_settings(files, world.paths)
