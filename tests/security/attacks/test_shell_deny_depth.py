"""Class 3: the shell sees nothing the file tools refuse.

A path that a deny rule matches is invisible or empty inside the sandbox at
any depth, in every root, read-write or read-only; the file tools refuse the
same paths. Each test plants a secret as the person would (outside the
sandbox), runs the attack through `shell_execute`, and checks that the
secret's bytes never come back and that the file on disk is untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from noema.security.masks import Masker
from noema.security.policy import AccessPolicy, Root
from noema.security.settings import RootSettings

from ..world import BWRAP, World

needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

SECRET = "DEEP-SECRET-5512"

# One name per default deny rule (a folder rule gets a file inside it).
DENIED_NAMES = [
    ".env",
    ".env.production",
    "server.pem",
    "api.key",
    "cert.p12",
    "cert.pfx",
    "app.keystore",
    "id_rsa",
    "id_ed25519.pub",
    "id_ecdsa",
    "secrets.toml",
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".ssh/config",
    ".aws/credentials",
    ".gnupg/pubring.kbx",
    ".kube/config",
    ".docker/config.json",
    ".azure/accessTokens.json",
]
DEPTHS = {"depth1": "", "depth2": "src/", "depth5": "a/b/c/d/"}


def plant(root: Path, relative: str, text: str = SECRET) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")
    return path


async def shell(world: World, command: str) -> str:
    result = await world.call("shell_execute", command=command)
    assert not result.is_error, result.content
    return result.content


def readonly_world(world: World) -> Path:
    """Make `world.outside` a read-only root and return it."""
    world.extra_roots = (RootSettings(path=world.outside, mode="read-only"),)
    world.build()
    return world.outside


@needs_bwrap
@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
@pytest.mark.parametrize("name", DENIED_NAMES)
async def test_secret_in_the_workspace_is_invisible(world: World, name: str, depth: str):
    secret = plant(world.ws, depth + name)
    out = await shell(world, f"cat {depth + name}; grep -r {SECRET} . ; echo END")
    assert SECRET not in out and "END" in out
    assert secret.read_text() == f"{SECRET}\n"
    refused = await world.call("file_read", path=depth + name)
    assert refused.is_error and SECRET not in refused.content


@needs_bwrap
@pytest.mark.parametrize("name", [".env", "deploy.pem", "id_rsa", ".ssh/id_rsa", ".aws/config"])
@pytest.mark.parametrize("depth", ["", "docs/", "x/y/z/"])
async def test_secret_in_a_read_only_root_is_invisible(world: World, name: str, depth: str):
    root = readonly_world(world)
    plant(root, depth + name)
    (root / "visible.txt").write_text("PUBLIC-TEXT\n")
    out = await shell(
        world, f"cat {root}/visible.txt {root}/{depth + name}; grep -r {SECRET} {root}"
    )
    assert "PUBLIC-TEXT" in out  # the root itself is mounted: the test can fail
    assert SECRET not in out


CUSTOM = {
    "folder-with-slash": ("config/prod", "config/prod/db.yaml", "config/dev/db.yaml"),
    "glob-with-slash": ("data/*/private.csv", "data/2024/private.csv", "data/2024/public.csv"),
    "name-glob-anywhere": ("*.secret", "a/b/token.secret", "a/b/token.txt"),
    "folder-name-anywhere": ("vault", "deep/er/vault/key.txt", "deep/er/vaults/key.txt"),
}


@needs_bwrap
@pytest.mark.parametrize("rule,denied,allowed", CUSTOM.values(), ids=CUSTOM.keys())
async def test_custom_rule_masks_what_it_names(world: World, rule, denied, allowed):
    world.deny_extra = (rule,)
    world.build()
    plant(world.ws, denied)
    plant(world.ws, allowed, "ALLOWED-TEXT")
    out = await shell(world, f"cat {denied} {allowed}; grep -r {SECRET} .")
    assert "ALLOWED-TEXT" in out and SECRET not in out


@needs_bwrap
async def test_absolute_rule_masks_in_the_workspace(world: World):
    world.deny_extra = (f"{world.ws}/deep/hidden",)
    world.build()
    plant(world.ws, "deep/hidden/k.txt")
    plant(world.ws, "deep/shown/k.txt", "ALLOWED-TEXT")
    out = await shell(
        world, "cat deep/hidden/k.txt deep/shown/k.txt; echo N=$(ls -A deep/hidden | wc -l)"
    )
    assert "ALLOWED-TEXT" in out and SECRET not in out and "N=0" in out


@needs_bwrap
async def test_absolute_rule_masks_in_a_read_only_root(world: World):
    root = readonly_world(world)
    world.deny_extra = (f"{root}/private",)
    world.build()
    plant(root, "private/notes.txt")
    out = await shell(
        world, f"cat {root}/private/notes.txt; echo N=$(ls -A {root}/private | wc -l)"
    )
    assert SECRET not in out and "N=0" in out


@needs_bwrap
async def test_masked_folder_lists_nothing(world: World):
    plant(world.ws, "p/q/.ssh/id_ed25519")
    out = await shell(world, "echo N=$(ls -A p/q/.ssh | wc -l)")
    assert "N=0" in out


MANEUVERS = {
    "rename-the-file": "mv s/.env s/plain.txt; cat s/plain.txt",
    "remove-then-read": "rm -f s/.env; cat s/.env",
    "rename-the-parent": "mv s moved && cat moved/.env",
    "hard-link-it": "ln s/.env copy.txt; cat copy.txt",
    "symlink-to-it": "ln -s s/.env l.txt; cat l.txt",
    "symlink-to-its-folder": "ln -s s t; cat t/.env",
    "copy-the-tree": "cp -r . /tmp/all 2>/dev/null; grep -r {S} /tmp/all",
    "archive-the-tree": "tar cf - . 2>/dev/null | grep -a {S}",
    "find-and-cat": "find . -name '.env' -exec cat {{}} +",
    "through-proc-root": "cat /proc/self/root$PWD/s/.env",
    "through-dot-dot": "cd s && cat ../s/./.env",
    "overwrite-then-read": "echo new > s/.env; cat s/.env",
    "mount-over": "mount --bind /tmp s 2>/dev/null; umount s/.env 2>/dev/null; cat s/.env",
    "python-open": "python3 -c \"print(open('s/.env').read())\"",
}


@needs_bwrap
@pytest.mark.parametrize("command", MANEUVERS.values(), ids=MANEUVERS.keys())
async def test_maneuvers_around_a_mask(world: World, command: str):
    secret = plant(world.ws, "s/.env")
    out = await shell(world, command.format(S=SECRET))
    assert SECRET not in out
    # Masked, so never changed; renaming its folder only moved it whole.
    assert [p.read_text() for p in world.ws.rglob(".env")] == [f"{SECRET}\n"]
    assert secret.exists() or (world.ws / "moved" / ".env").exists()


@needs_bwrap
async def test_hard_link_made_by_the_person_is_masked_too(world: World):
    secret = plant(world.ws, "keys/.env")
    os.link(secret, world.ws / "notes-copy.txt")
    out = await shell(world, "cat notes-copy.txt; echo END")
    assert SECRET not in out and "END" in out
    refused = await world.call("file_read", path="notes-copy.txt")
    assert SECRET not in refused.content


@needs_bwrap
async def test_hard_link_into_a_masked_folder_is_masked(world: World):
    secret = plant(world.ws, "home/.ssh/id_rsa")
    os.link(secret, world.ws / "backup.bin")
    out = await shell(world, "cat backup.bin; echo END")
    assert SECRET not in out and "END" in out


@needs_bwrap
async def test_a_new_secret_made_by_the_command_is_made_but_not_read_back(world: World):
    out = await shell(world, "mkdir -p n && echo MINE-123 > n/.env && cat n/.env; echo END")
    assert "MINE-123" not in out and "END" in out  # a secret's name refuses whoever made it
    assert (world.ws / "n" / ".env").read_text() == "MINE-123\n"


@needs_bwrap
async def test_secret_added_between_commands_is_masked(world: World):
    plant(world.ws, "a/b/readme.txt", "README")
    first = await shell(world, "cat a/b/readme.txt")
    assert "README" in first
    plant(world.ws, "a/b/.env")  # the person adds a secret; the cache must notice
    plant(world.ws, "a/b/c/d/new.pem")
    out = await shell(world, f"cat a/b/.env a/b/c/d/new.pem; grep -r {SECRET} .; echo END")
    assert SECRET not in out and "END" in out


@needs_bwrap
async def test_folder_renamed_into_a_secret_name_is_masked(world: World):
    plant(world.ws, "x/plain/key.txt")
    await shell(world, "true")
    (world.ws / "x" / "plain").rename(world.ws / "x" / ".aws")
    out = await shell(world, "cat x/.aws/key.txt; echo END")
    assert SECRET not in out and "END" in out


@needs_bwrap
async def test_secret_inside_a_nested_read_only_root(world: World):
    nested = world.ws / "vendor"
    plant(nested, "lib/.env")
    plant(nested, "lib/code.py", "PUBLIC-CODE")
    world.extra_roots = (RootSettings(path=nested, mode="read-only"),)
    world.build()
    out = await shell(world, "cat vendor/lib/code.py vendor/lib/.env; echo x > vendor/lib/new")
    assert "PUBLIC-CODE" in out and SECRET not in out
    assert not (nested / "lib" / "new").exists()


@needs_bwrap
async def test_the_shell_and_the_file_tools_agree(world: World):
    paths = ["m/.env", "m/n/key.pem", "m/readme.md", "m/n/o/id_rsa", "m/n/o/code.py"]
    for rel in paths:
        plant(world.ws, rel, f"{SECRET}-{rel}")
    for rel in paths:
        seen_by_shell = f"{SECRET}-{rel}" in await shell(world, f"cat {rel}")
        read = await world.call("file_read", path=rel)
        assert seen_by_shell == (not read.is_error), rel


# The walk on its own: no sandbox needed.


def masker_for(world: World, deny: tuple[str, ...] = (".env", "*.pem")) -> Masker:
    """A walker that trusts its cache at once (the change time of a folder
    cannot be set back, so tests cannot age it)."""
    policy = AccessPolicy([Root(world.ws.resolve(), True)], deny, (world.paths.agents_dir,))
    return Masker(policy, world.paths.agents_dir, racy_s=0)


def test_warm_walk_reads_no_folder_again(world: World):
    for i in range(30):
        plant(world.ws, f"d{i}/e/f/file.txt", "x")
    plant(world.ws, "d3/e/.env")
    masker = masker_for(world)
    cold = masker.scan()
    warm = masker.scan()
    assert warm.read == 0 and warm.folders == cold.folders
    assert warm.hidden == cold.hidden == (world.ws.resolve() / "d3/e/.env",)


def test_a_change_reads_only_that_folder(world: World):
    for i in range(10):
        plant(world.ws, f"d{i}/file.txt", "x")
    masker = masker_for(world)
    masker.scan()
    plant(world.ws, "d4/cert.pem")
    after = masker.scan()
    assert after.read == 1
    assert world.ws.resolve() / "d4/cert.pem" in after.hidden


def test_time_stamps_set_back_do_not_hide_a_change(world: World):
    plant(world.ws, "d/file.txt", "x")
    masker = masker_for(world)
    masker.scan()
    folder = world.ws / "d"
    stamp = folder.stat()
    plant(world.ws, "d/.env")
    os.utime(folder, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # as a command could
    assert folder.resolve() / ".env" in masker.scan().hidden


def test_walk_does_not_follow_links_or_enter_git(world: World):
    plant(world.outside, "elsewhere/.env")
    (world.ws / "link").symlink_to(world.outside)
    plant(world.ws, ".git/objects/.env")
    scan = masker_for(world).scan()
    assert not any(str(world.outside) in str(p) for p in scan.hidden)
    assert not any(".git" in p.parts for p in scan.hidden)
    assert world.ws.resolve() / ".git" in scan.frozen


@needs_bwrap
async def test_secret_in_a_folder_that_cannot_be_listed(world: World):
    """Mode 0300: no one may list it, yet a command may open a name it guesses."""
    plant(world.ws, "locked/.env")
    (world.ws / "locked").chmod(0o300)
    try:
        out = await shell(world, "cat locked/.env; echo END")
    finally:
        (world.ws / "locked").chmod(0o700)
    assert SECRET not in out and "END" in out
