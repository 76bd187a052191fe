"""Class 4: git metadata is no way out.

A command may plant hooks or configuration that the person's git runs
outside the sandbox. After each attack the person's own `git` (the real
binary, outside the sandbox, with `GIT_CEILING_DIRECTORIES` unset) runs in
every folder of the workspace; the payload would create a marker file there,
and the marker never appears. Every attack also runs once without the
sandbox and its guard, as a control: there the marker does appear, so each
test can fail."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
from pathlib import Path

import pytest

from noema.security.masks import looks_like_repository

from ..world import BWRAP, World

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

ME = "-c user.name=agent -c user.email=agent@example.org"

# A shell prelude shared by the attacks: `evil` is a program that leaves the
# marker and passes its input through (so filters and converters "work");
# `hook DIR NAME` installs it as a hook.
PRELUDE = (
    "printf '#!/bin/sh\\ntouch {m}\\ncat\\n' > evil.sh && chmod +x evil.sh && "
    "hook() {{ mkdir -p \"$1\" && printf '#!/bin/sh\\ntouch {m}\\n' > \"$1/$2\" "
    "&& chmod +x \"$1/$2\"; }} && "
)
FSMON = "git -C {r} config core.fsmonitor \"$PWD/evil.sh\""
COMMITTED = (
    "git init -q r && echo a > r/f && git -C r add f && git " + ME + " -C r commit -qm a "
    "&& echo b > r/f && "
)

# Each attack leaves metadata that one of the person's commands below runs.
ATTACKS = {
    "fsmonitor": "git init -q r && " + FSMON.format(r="r"),
    "pre-commit-hook": "git init -q r && hook r/.git/hooks pre-commit",
    "post-commit-hook": "git init -q r && hook r/.git/hooks post-commit",
    "commit-msg-hook": "git init -q r && hook r/.git/hooks commit-msg",
    "prepare-commit-msg-hook": "git init -q r && hook r/.git/hooks prepare-commit-msg",
    "post-index-change-hook": (
        "git init -q r && echo x > r/f && hook r/.git/hooks post-index-change"
    ),
    "hooks-path": (
        "git init -q r && hook r/my pre-commit && git -C r config core.hooksPath \"$PWD/r/my\""
    ),
    "include-path": (
        "git init -q r && printf '[core]\\n\\tfsmonitor = %s\\n' \"$PWD/evil.sh\" > r/inc.cfg "
        "&& git -C r config include.path ../inc.cfg"
    ),
    "include-if": (
        "git init -q r && printf '[core]\\n\\tfsmonitor = %s\\n' \"$PWD/evil.sh\" > r/inc.cfg "
        "&& printf '[includeIf \"gitdir:**\"]\\n\\tpath = ../inc.cfg\\n' >> r/.git/config"
    ),
    "filter-clean": (
        "git init -q r && echo '* filter=x' > r/.gitattributes && echo d > r/f "
        "&& git -C r config filter.x.clean \"$PWD/evil.sh\""
    ),
    "filter-process": (
        "git init -q r && echo '* filter=x' > r/.gitattributes && echo d > r/f "
        "&& git -C r config filter.x.process \"$PWD/evil.sh\""
    ),
    "diff-textconv": (
        COMMITTED + "echo 'f diff=x' > r/.gitattributes "
        "&& git -C r config diff.x.textconv \"$PWD/evil.sh\""
    ),
    "diff-external": COMMITTED + "git -C r config diff.external \"$PWD/evil.sh\"",
    "diff-driver-command": (
        COMMITTED + "echo 'f diff=x' > r/.gitattributes "
        "&& git -C r config diff.x.command \"$PWD/evil.sh\""
    ),
    "per-worktree-config": (
        "git init -q r && git -C r config extensions.worktreeConfig true && "
        "git -C r config --worktree core.fsmonitor \"$PWD/evil.sh\""
    ),
    "gpg-program": (
        "git init -q r && git -C r config commit.gpgSign true "
        "&& git -C r config gpg.program \"$PWD/evil.sh\""
    ),
    "deep-repository": "git init -q a/b/c/d && " + FSMON.format(r="a/b/c/d"),
    "nested-new-repositories": (
        "git init -q r && git init -q r/inner && hook r/inner/.git/hooks pre-commit"
    ),
    "gitfile-to-a-store": (
        "git init -q --bare store && git -C store config core.bare false && "
        + FSMON.format(r="store") + " && mkdir w && echo 'gitdir: ../store' > w/.git"
    ),
    "gitlink-to-a-store": (
        "git init -q --bare store && git -C store config core.bare false && "
        + FSMON.format(r="store") + " && mkdir w && ln -s ../store w/.git"
    ),
    "bare-layout": (
        "git init -q --bare b && git -C b config core.bare false && "
        "git -C b config core.worktree .. && " + FSMON.format(r="b")
    ),
    "hand-made-bare-layout": (
        "mkdir -p h/objects h/refs && echo 'ref: refs/heads/main' > h/HEAD && "
        "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n"
        "\\tworktree = ..\\n\\tfsmonitor = %s\\n' "
        "\"$PWD/evil.sh\" > h/config"
    ),
    "worktree-commondir": (
        "git init -q --bare common && git -C common config core.bare false && "
        + FSMON.format(r="common") + " && mkdir -p wt w && echo 'ref: refs/heads/main' > wt/HEAD "
        "&& echo ../common > wt/commondir && echo 'gitdir: ../wt' > w/.git && rm common/HEAD"
    ),
    "submodule-gitdir": (
        "git init -q p && mkdir -p p/s && git init -q --bare p/.git/modules/s && "
        "git -C p/.git/modules/s config core.bare false && " + FSMON.format(r="p/.git/modules/s")
        + " && echo 'gitdir: ../.git/modules/s' > p/s/.git"
    ),
    "repository-replacing-a-moved-one": (
        "mv proj proj2 && git init -q proj && hook proj/.git/hooks pre-commit"
    ),
    "hook-in-a-symlinked-hooks-folder": (
        "git init -q r && hook scripts pre-commit && rm -rf r/.git/hooks && "
        "ln -s ../../scripts r/.git/hooks"
    ),
    "locked-repository-folder": (
        "git init -q r && hook r/.git/hooks pre-commit && chmod 300 r"
    ),
    "locked-hooks-folder": (
        "git init -q r && hook r/.git/hooks pre-commit && chmod 100 r/.git/hooks"
    ),
    "locked-git-folder": "git init -q r && " + FSMON.format(r="r") + " && chmod 500 r/.git",
    # The guard must resolve a pointer as the person's git does: /proc/self/cwd
    # is the agent's folder for the agent and the person's for their git.
    "gitfile-through-proc-cwd": (
        "git init -q a && mkdir -p a/.git/objects/evil/objects a/.git/objects/evil/refs sub && "
        "echo 'ref: refs/heads/main' > a/.git/objects/evil/HEAD && "
        "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n"
        "\\tfsmonitor = %s\\n' \"$PWD/evil.sh\" > a/.git/objects/evil/config && "
        "echo 'gitdir: /proc/self/cwd/../a/.git/objects/evil' > sub/.git"
    ),
    "gitlink-through-proc-cwd": (
        "git init -q a && mkdir -p a/.git/objects/evil/objects a/.git/objects/evil/refs sub && "
        "echo 'ref: refs/heads/main' > a/.git/objects/evil/HEAD && "
        "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n"
        "\\tfsmonitor = %s\\n' \"$PWD/evil.sh\" > a/.git/objects/evil/config && "
        "ln -s /proc/self/cwd/../a/.git/objects/evil sub/.git"
    ),
    "config-as-a-symlink": (
        "git init -q r && cp r/.git/config cfg && git config --file cfg core.fsmonitor "
        "\"$PWD/evil.sh\" && rm r/.git/config && ln -s ../../cfg r/.git/config"
    ),
}

# Attacks the open guard stops before they are made: a file in a folder
# under a secret's name cannot be opened again, even by the command that
# made it, so no repository can be built there.
REFUSED_ATTACKS = {
    "gitfile-into-a-secret-folder": (
        "mkdir -p .env w && git init -q --bare .env/store && "
        "git -C .env/store config core.bare false && " + FSMON.format(r=".env/store")
        + " && echo 'gitdir: ../.env/store' > w/.git"
    ),
}


def person_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), LC_ALL="C")
    return env


PERSON_COMMANDS = (
    ["status"],
    ["diff"],
    ["add", "-A"],
    ["-c", "user.name=Person", "-c", "user.email=p@example.org", "commit", "--allow-empty",
     "-m", "x"],
    ["log", "-p"],
)


def person_runs_git_everywhere(ws: Path, home: Path) -> None:
    """The person's own git, run as they would, in every folder of the workspace."""
    folders = [ws]
    for folder, names, files in os.walk(ws):
        if looks_like_repository(set(names) | set(files)):
            names[:] = []  # git runs there already; its insides are the same repository
        names[:] = [n for n in names if n not in (".git", "hooks")]
        # Listed from the parent: a folder no one may list can still be entered.
        folders += [Path(folder) / n for n in names]
    for folder in folders:
        for args in PERSON_COMMANDS:
            subprocess.run(
                ["git", *args], cwd=folder, env=person_env(home), capture_output=True,
                timeout=30, stdin=subprocess.DEVNULL,
            )


def person_repository(ws: Path, name: str) -> Path:
    """A repository of the person's own, made before the agent starts."""
    repo = ws / name
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    return repo


def setting(world: World, tmp_path: Path):
    marker = tmp_path / "MARKER"
    home = tmp_path / "person-home"
    home.mkdir(exist_ok=True)
    person_repository(world.ws, "proj")
    return marker, home


EVERY_ATTACK = {**ATTACKS, **REFUSED_ATTACKS}


@pytest.mark.parametrize("attack", EVERY_ATTACK.values(), ids=EVERY_ATTACK.keys())
async def test_the_attack_is_real_without_the_guard(world: World, tmp_path: Path, attack: str):
    marker, home = setting(world, tmp_path)
    command = (PRELUDE + attack).format(m=marker)
    done = subprocess.run(["sh", "-c", command], cwd=world.ws, capture_output=True, text=True,
                          timeout=60, env=person_env(home))
    assert done.returncode == 0, done.stderr
    person_runs_git_everywhere(world.ws, home)
    assert marker.exists(), "the payload never ran: this attack proves nothing"


@pytest.mark.parametrize("attack", ATTACKS.values(), ids=ATTACKS.keys())
async def test_the_person_git_runs_nothing_the_agent_wrote(
    world: World, tmp_path: Path, attack: str, caplog
):
    marker, home = setting(world, tmp_path)
    caplog.set_level(logging.WARNING, logger="noema.security.gitguard")
    result = await world.call("shell_execute", command=(PRELUDE + attack).format(m=marker))
    assert not result.is_error, result.content
    assert "Exit code 0" in result.content, result.content  # the attack itself went through
    person_runs_git_everywhere(world.ws, home)
    assert not marker.exists()
    assert "neutralised" in result.content  # the model is told...
    assert any("neutralised" in r.getMessage() for r in caplog.records)  # ...and the person


@pytest.mark.parametrize("attack", REFUSED_ATTACKS.values(), ids=REFUSED_ATTACKS.keys())
async def test_the_person_git_runs_nothing_the_guard_refused_to_build(
    world: World, tmp_path: Path, attack: str
):
    marker, home = setting(world, tmp_path)
    result = await world.call("shell_execute", command=(PRELUDE + attack).format(m=marker))
    assert "Permission denied" in result.content and "Exit code 0" not in result.content
    person_runs_git_everywhere(world.ws, home)
    assert not marker.exists()


# The person's own repositories are read-only inside the sandbox.
FROZEN = {
    "hook-into-nested-repo": "hook proj/.git/hooks pre-commit",
    "config-into-nested-repo": FSMON.format(r="proj"),
    "hooks-path-into-nested-repo": (
        "hook proj/.git/other pre-commit; git -C proj config core.hooksPath .git/other"
    ),
    "replace-nested-gitdir": (
        "rm -rf proj/.git; git init -q proj && hook proj/.git/hooks pre-commit"
    ),
    "move-nested-gitdir-away": (
        "mv proj/.git proj/old && git init -q proj && " + FSMON.format(r="proj")
    ),
    "write-top-gitdir": "mkdir -p .git/hooks; hook .git/hooks pre-commit; " + FSMON.format(r="."),
    "hook-into-deep-repo": "hook deep/er/repo/.git/hooks post-commit",
    "hook-into-person-bare-repo": "hook vault.git/hooks pre-commit; " + FSMON.format(r="vault.git"),
    "swap-gitdir-for-link": "mv proj/.git /tmp/g; ln -s /tmp/g proj/.git",
}


@pytest.mark.parametrize("attack", FROZEN.values(), ids=FROZEN.keys())
async def test_the_person_repositories_are_read_only(world: World, tmp_path: Path, attack: str):
    marker, home = setting(world, tmp_path)
    person_repository(world.ws, "deep/er/repo")
    subprocess.run(["git", "init", "-q", "--bare", str(world.ws / "vault.git")], check=True,
                   timeout=30)
    subprocess.run(["git", "-C", str(world.ws / "vault.git"), "config", "core.bare", "false"],
                   check=True, timeout=30)
    before = {p: p.read_bytes() for p in world.ws.rglob("config") if p.is_file()}
    result = await world.call("shell_execute", command=(PRELUDE + attack).format(m=marker))
    assert "Read-only file system" in result.content or "busy" in result.content.lower()
    after = {p: p.read_bytes() for p in before if p.exists()}
    assert after == before
    person_runs_git_everywhere(world.ws, home)
    assert not marker.exists()


DANGEROUS_KEYS = {
    "core.fsmonitor": "X",
    "core.hooksPath": "X",
    "core.sshCommand": "X",
    "core.pager": "X",
    "core.editor": "X",
    "core.askPass": "X",
    "core.gitProxy": "X",
    "core.alternateRefsCommand": "X",
    "diff.external": "X",
    "diff.x.textconv": "X",
    "diff.x.command": "X",
    "merge.x.driver": "X",
    "filter.x.smudge": "X",
    "credential.helper": "X",
    "credential.https://example.org.helper": "X",
    "gpg.program": "X",
    "gpg.ssh.program": "X",
    "sequence.editor": "X",
    "alias.st": "!X",
    "pager.log": "X",
    "include.path": "X",
    "uploadpack.packObjectsHook": "X",
    "receive.procReceiveRefs": "refs/for",
    "remote.origin.uploadpack": "X",
    "remote.origin.receivepack": "X",
    "submodule.s.update": "!X",
    "hook.lint.command": "X",
    "protocol.ext.allow": "always",
    "init.templateDir": "X",
    "sendemail.smtpServer": "X",
    "interactive.diffFilter": "X",
    "difftool.x.cmd": "X",
    "mergetool.x.path": "X",
    "trailer.x.command": "X",
}


@pytest.mark.parametrize("key,value", DANGEROUS_KEYS.items(), ids=DANGEROUS_KEYS.keys())
async def test_dangerous_key_is_removed_and_the_rest_kept(world: World, key: str, value: str):
    command = (
        f"git init -q r && git -C r config user.name Kept && git -C r config {key} '{value}' "
        "&& git -C r config remote.origin.url https://example.org/x.git"
    )
    result = await world.call("shell_execute", command=command)
    assert "neutralised" in result.content, result.content
    config = world.ws / "r" / ".git" / "config"

    def get(name: str, file: Path = config) -> str:
        return subprocess.run(["git", "config", "--file", str(file), "--get", name],
                              capture_output=True, text=True, timeout=30).stdout.strip()

    assert get(key) == ""
    assert get("user.name") == "Kept" and get("remote.origin.url") == "https://example.org/x.git"
    aside = config.with_name("config.noema-quarantine")
    assert get(key, aside) == value  # nothing of the agent's is deleted, only set aside


async def test_a_plain_repository_is_left_alone_and_keeps_working(world: World, tmp_path: Path):
    result = await world.call(
        "shell_execute", command=f"git init -q r && git {ME} -C r commit -q --allow-empty -m first"
    )
    assert "neutralised" not in result.content
    assert not (world.ws / "r" / ".git" / "config.noema-quarantine").exists()
    log = subprocess.run(["git", "-C", str(world.ws / "r"), "log", "--format=%s"],
                         capture_output=True, text=True, timeout=30)
    assert log.stdout.strip() == "first"


async def test_a_neutralised_repository_keeps_working(world: World, tmp_path: Path):
    marker = tmp_path / "MARKER"
    command = (PRELUDE + ATTACKS["fsmonitor"] + f" && git {ME} -C r commit -q --allow-empty -m one")
    await world.call("shell_execute", command=command.format(m=marker))
    marker.unlink(missing_ok=True)  # the command's own git ran it inside the sandbox
    log = subprocess.run(["git", "-C", str(world.ws / "r"), "log", "--format=%s"],
                         capture_output=True, text=True, timeout=30)
    assert log.stdout.strip() == "one" and not marker.exists()


async def test_a_new_repository_is_read_only_in_the_next_command(world: World):
    await world.call("shell_execute", command="git init -q r")
    result = await world.call("shell_execute", command="echo x > r/.git/config")
    assert "Read-only file system" in result.content


async def test_timed_out_command_is_checked(world: World, tmp_path: Path):
    marker = tmp_path / "MARKER"
    command = (PRELUDE + ATTACKS["pre-commit-hook"] + " && sleep 30").format(m=marker)
    # Long enough for the sandbox and six small programs to plant the hook on a
    # loaded machine: a time-out before that would leave nothing to neutralise.
    result = await world.call("shell_execute", command=command, timeout=6)
    assert "timed out" in result.content and "neutralised" in result.content
    person_runs_git_everywhere(world.ws, tmp_path)
    assert not marker.exists()


async def test_cancelled_command_is_checked(world: World, tmp_path: Path):
    marker = tmp_path / "MARKER"
    command = (PRELUDE + ATTACKS["fsmonitor"] + " && touch ready && sleep 30").format(m=marker)
    task = asyncio.create_task(world.call("shell_execute", command=command))
    for _ in range(400):
        if (world.ws / "ready").exists():
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    told = world.contexts[-1].interruption
    assert len(told) == 1 and "neutralised" in told[0]
    person_runs_git_everywhere(world.ws, tmp_path)
    assert not marker.exists()


async def test_config_git_cannot_parse_is_set_aside(world: World, tmp_path: Path):
    marker = tmp_path / "MARKER"
    command = (
        "git init -q r && printf '[core]\\n\\tfsmonitor = %s\\n[broken\\n' \"$PWD/evil.sh\" "
        ">> r/.git/config"
    )
    result = await world.call("shell_execute", command=(PRELUDE + command).format(m=marker))
    assert "neutralised" in result.content
    assert not (world.ws / "r" / ".git" / "config").exists()
    assert (world.ws / "r" / ".git" / "config.noema-quarantine").exists()


@pytest.mark.parametrize("where", [".gitconfig", ".config/git/config"])
async def test_global_config_in_a_home_workspace(
    world: World, tmp_path: Path, monkeypatch, where: str
):
    """When the workspace is the person's home, their global git config lies in it."""
    marker = tmp_path / "MARKER"
    monkeypatch.setenv("HOME", str(world.ws))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    person_repository(world.ws, "proj")
    command = (
        f"mkdir -p $(dirname {where}) && printf '[core]\\n\\tfsmonitor = %s\\n' "
        f"\"$PWD/evil.sh\" > {where}"
    )
    result = await world.call("shell_execute", command=(PRELUDE + command).format(m=marker))
    assert "neutralised" in result.content, result.content
    person_runs_git_everywhere(world.ws, world.ws)
    assert not marker.exists()


async def test_global_config_of_the_person_is_read_only(world: World, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HOME", str(world.ws))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (world.ws / ".gitconfig").write_text("[user]\n\tname = Person\n")
    result = await world.call(
        "shell_execute", command="printf '[core]\\n\\tpager = x\\n' >> .gitconfig"
    )
    assert "Read-only file system" in result.content
    assert (world.ws / ".gitconfig").read_text() == "[user]\n\tname = Person\n"


PERSON_TOOL = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = /usr/bin/watchman-hook\n"


def person_repository_with_own_settings(folder: Path) -> tuple[Path, Path]:
    repo = folder
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    config = repo / ".git" / "config"
    config.write_text(PERSON_TOOL)
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    return config, hook


WHERE_THE_PERSON_KEEPS_A_REPO = {
    "workspace": ("ws", "proj"),
    "workspace-deep": ("ws", "a/b/c/proj"),
    "secret-folder": ("ws", "private/proj"),
    "nested-read-only-root": ("ws", "vendor/proj"),
}


@pytest.mark.parametrize(
    "base,rel", WHERE_THE_PERSON_KEEPS_A_REPO.values(), ids=WHERE_THE_PERSON_KEEPS_A_REPO.keys()
)
async def test_the_person_own_hooks_and_settings_are_left_alone(world: World, base, rel):
    from noema.security.settings import RootSettings

    config, hook = person_repository_with_own_settings(world.ws / rel)
    world.deny_extra = ("private",)
    world.extra_roots = (RootSettings(path=world.ws / "vendor", mode="read-only"),)
    (world.ws / "vendor").mkdir(exist_ok=True)
    world.build()
    result = await world.call("shell_execute", command="echo hello > note.txt")
    assert "neutralised" not in result.content
    assert config.read_text() == PERSON_TOOL
    assert hook.stat().st_mode & 0o111 and hook.read_text() == "#!/bin/sh\nexit 0\n"
    assert not list((world.ws / rel / ".git").glob("*noema-quarantine*"))


def include_in_repository(world: World, home: Path, name: str, exists: bool) -> None:
    repo = person_repository(world.ws, "proj")
    if exists:
        (repo / name).write_text("[user]\n\tname = Team\n")
    subprocess.run(["git", "-C", str(repo), "config", "include.path", f"../{name}"],
                   check=True, timeout=30)


def include_in_global_config(world: World, home: Path, name: str, exists: bool) -> None:
    person_repository(world.ws, "proj")
    if exists:
        (world.ws / name).write_text("[user]\n\tname = Team\n")
    (home / ".gitconfig").write_text(f"[includeIf \"gitdir:/\"]\n\tpath = {world.ws / name}\n")


INCLUDES = {
    "repository-includes-an-existing-file": (include_in_repository, "proj/team.gitconfig", True),
    "repository-includes-a-missing-file": (include_in_repository, "proj/local.gitconfig", False),
    "global-config-includes-an-existing-file": (include_in_global_config, "shared.gitconfig", True),
    "global-config-includes-a-missing-file": (include_in_global_config, "later.gitconfig", False),
}


def include_attack(target: str) -> str:
    return f"printf '[core]\\n\\tfsmonitor = %s\\n' \"$PWD/evil.sh\" >> {target}"


@pytest.mark.parametrize("setup,target,exists", INCLUDES.values(), ids=INCLUDES.keys())
async def test_include_attack_is_real_without_the_guard(
    world: World, tmp_path: Path, setup, target: str, exists: bool
):
    marker, home = tmp_path / "MARKER", tmp_path / "person-home"
    home.mkdir()
    setup(world, home, Path(target).name, exists)
    command = (PRELUDE + include_attack(target)).format(m=marker)
    subprocess.run(["sh", "-c", command], cwd=world.ws, check=True, timeout=60,
                   env=person_env(home))
    person_runs_git_everywhere(world.ws, home)
    assert marker.exists()


@pytest.mark.parametrize("setup,target,exists", INCLUDES.values(), ids=INCLUDES.keys())
async def test_files_the_person_git_includes_are_guarded(
    world: World, tmp_path: Path, monkeypatch, setup, target: str, exists: bool
):
    marker, home = tmp_path / "MARKER", tmp_path / "person-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # the agent runs as the person
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    setup(world, home, Path(target).name, exists)
    result = await world.call(
        "shell_execute", command=(PRELUDE + include_attack(target)).format(m=marker)
    )
    if exists:
        assert "Read-only file system" in result.content, result.content
    else:
        assert "neutralised" in result.content, result.content
    person_runs_git_everywhere(world.ws, home)
    assert not marker.exists()


async def test_names_git_reads_as_git_are_named_as_left_out_of_the_history(world: World):
    result = await world.call(
        "shell_execute", command="echo a > ok.txt; mkdir -p d/.GIT && echo b > d/.GIT/x"
    )
    assert "Files changed: ok.txt" in result.content
    assert "Not recorded in the history" in result.content and "d/.GIT" in result.content
    again = await world.call("shell_execute", command="echo b > d/.GIT/y")
    assert "Read-only file system" in again.content  # and frozen from then on
