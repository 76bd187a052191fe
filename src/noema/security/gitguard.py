"""After a command: no git metadata it left behind runs anything for the person.

A sandboxed command cannot change the git metadata that existed before it
(`masks.py` freezes it), but it can create new metadata: a `.git` folder, a
`.git` file or link pointing at a folder it filled, a folder git takes for a
bare repository, the person's global git configuration when a root holds
their home. The person's next `git status` there would run its hooks and
the commands its configuration names, outside the sandbox.

Each such place is neutralised in place rather than removed, so a repository
the agent made on purpose (`git init`, `git clone`) keeps working and nothing
is deleted:
- a configuration file that sets a key git executes is moved aside
  (`config.noema-quarantine`, which git never reads) and replaced by a copy
  without those keys; one that git itself cannot parse is only moved aside
  (git works without one);
- a `hooks` folder holding anything but git's `*.sample` files is moved aside
  (`hooks.noema-quarantine`);
- `commondir` and `gitdir:` pointers are followed, inside the writable roots,
  to the folders whose configuration and hooks git would use;
- a file in a writable root that one of the person's configurations includes
  (`include.path`, `includeIf.*.path`) is frozen while the command runs, and
  checked after it when the command created or replaced it.
The configuration is read by git's own parser (`git config --list`), so what
is judged is what the person's git would read.

Keys removed: whole sections that exist to run or include something (alias,
include, includeIf, hook, filter, credential, gpg, pager, protocol, difftool,
mergetool, guitool, man, browser, instaweb, sendemail, imap, trailer) and
variables that name a program or a hook whatever their section
(core.fsmonitor, core.hooksPath, core.sshCommand, core.pager, core.editor,
core.askPass, core.gitProxy, core.alternateRefsCommand, diff.external,
*.command, *.cmd, *.textconv, *.driver, *.program, *.helper, *.uploadpack,
*.receivepack, uploadpack.packObjectsHook, receive.procReceiveRefs,
sequence.editor, interactive.diffFilter, init.templateDir, web.browser),
and `submodule.*.update` when it starts with `!`.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .gitreads import Includes, global_git_configs, read_config
from .masks import GitItem, Scan
from .policy import AccessPolicy

log = logging.getLogger(__name__)

_SECTIONS = frozenset({
    "alias", "include", "includeif", "hook", "filter", "credential", "gpg", "pager",
    "protocol", "difftool", "mergetool", "guitool", "man", "browser", "instaweb",
    "sendemail", "imap", "trailer",
})
_VARIABLES = frozenset({
    "fsmonitor", "hookspath", "sshcommand", "pager", "editor", "askpass", "gitproxy",
    "alternaterefscommand", "external", "command", "cmd", "textconv", "driver", "program",
    "helper", "uploadpack", "receivepack", "packobjectshook", "procreceiverefs",
    "difffilter", "templatedir", "browser", "tunnel", "clean", "smudge", "process",
})
_CONFIG_NAMES = ("config", "config.worktree")
# Data, never configuration: not walked. (objects/ and refs/ are: a repository
# can be hidden in them, for a `gitdir:` line to point at.)
_SKIP_INSIDE = frozenset({"lfs"})
_MAX_CONFIG_BYTES = 1 << 20
_MAX_POINTER_BYTES = 4096
_MAX_INCLUDES = 200  # configuration files read while following includes
_MAX_FOLDERS = 5_000  # inside one new .git; past it the whole folder is set aside
_ASIDE = ".noema-quarantine"
_RACY_NS = 2_000_000_000


@dataclass(frozen=True, slots=True)
class Neutralised:
    """One place of git metadata made harmless, and how."""

    where: Path
    actions: tuple[str, ...]

    def describe(self, shown: str) -> str:
        return f"{shown}: {'; '.join(self.actions)}"


def dangerous(key: str, value: str | None) -> bool:
    """Whether git would run a program (or read another file) because of this
    configuration variable. `key` is as `git config --list` prints it."""
    section, _, rest = key.lower().partition(".")
    variable = rest.rpartition(".")[2]
    if section in _SECTIONS or variable in _VARIABLES:
        return True
    if (section, variable) == ("submodule", "update"):
        return (value or "").lstrip().startswith("!")
    return False


def render_config(entries: Sequence[tuple[str, str | None]]) -> str:
    """A configuration file holding exactly these variables."""
    lines: list[str] = []
    current: tuple[str, str | None] | None = None
    for key, value in entries:
        section, _, rest = key.partition(".")
        subsection, dot, variable = rest.rpartition(".")
        header = (section, subsection if dot else None)
        if header != current:
            current = header
            if dot:
                quoted = subsection.replace("\\", "\\\\").replace('"', '\\"')
                lines.append(f'[{section} "{quoted}"]')
            else:
                lines.append(f"[{section}]")
        if value is None:
            lines.append(f"\t{variable}")
        else:
            escaped = (
                value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                .replace("\t", "\\t").replace("\b", "\\b")
            )
            lines.append(f'\t{variable} = "{escaped}"')
    return "".join(line + "\n" for line in lines)


@dataclass(frozen=True, slots=True)
class Included:
    """A file that a configuration of the person's includes (`include.path`,
    `includeIf.*.path`), lying in a writable root: git reads it as its own
    configuration, so it is frozen like one."""

    path: Path  # as the including configuration names it
    real: Path  # where it leads
    identity: tuple[int, int] | None  # of the file it leads to; None when absent

    @property
    def freezable(self) -> bool:
        return self.identity is not None and self.real.is_file()


class GitGuard:
    """Neutralises what a command left in the writable roots; remembers which
    configuration files it already found clean, so an unchanged one is not
    parsed again after every command."""

    def __init__(self, policy: AccessPolicy, agent_data: Path) -> None:
        self.policy = policy
        self.writable = tuple(r.path for r in policy.writable_roots)
        self.agent_data = Path(os.path.realpath(agent_data))
        self._clean: dict[tuple[int, int], tuple[int, int, int]] = {}
        self._reads = Includes()

    def includes(self, scan: Scan) -> tuple[Included, ...]:
        """The files in writable roots that the person's git configurations
        (the repositories' found by `scan` and the global ones) include,
        whatever the include's condition, followed a few levels deep."""
        frozen = set(scan.frozen)
        queue: list[Path] = list(global_git_configs())
        for item in scan.git:
            if item.path not in frozen:
                continue  # not the person's: the command could have written it
            if item.kind == "config":
                queue.append(item.path)
            elif item.kind in ("gitdir", "repository"):
                queue += [item.path / name for name in _CONFIG_NAMES]
        found: dict[Path, Included] = {}
        seen: set[Path] = set()
        while queue and len(seen) < _MAX_INCLUDES:
            config = queue.pop()
            if config in seen:
                continue
            seen.add(config)
            for target in self._reads.of(config):
                real = Path(os.path.realpath(target))
                if self._inside(target) or self._inside(real):
                    found[target] = Included(target, real, _identity(real))
                queue.append(real)
        return tuple(found.values())

    def check(
        self, before: Scan, after: Scan, included: Sequence[Included] = ()
    ) -> list[Neutralised]:
        """Neutralise the git metadata in `after` that the command could have
        written: what was frozen or masked in `before` could not change, and
        is the person's; say what was done. `included` are the files the
        person's configurations include, as found before the command."""
        frozen = set(before.frozen)
        exempt = {
            item.identity
            for item in before.git
            if item.path in frozen or any(item.path.is_relative_to(h) for h in before.hidden)
        }
        done: list[Neutralised] = []
        for include in included:
            real = Path(os.path.realpath(include.path))
            if _identity(real) in (None, include.identity) or not self._inside(real):
                continue  # unchanged (it was frozen), gone, or out of reach
            try:
                actions = self._config(real.parent, real.name)
            except OSError as exc:
                actions = [f"could not be checked ({exc.strerror or exc})"]
            if actions:
                actions = [f"a file the person's git configuration includes: {a}" for a in actions]
                done.append(Neutralised(include.path, tuple(actions)))
                log.warning("a file git includes was neutralised: %s: %s", include.path,
                            "; ".join(actions))
        visited: set[tuple[int, int]] = set()
        for item in after.git:
            if item.identity in exempt:
                continue
            try:
                actions = self._item(item, exempt, visited)
            except OSError as exc:
                actions = [f"could not be checked ({exc.strerror or exc})"]
            if actions:
                done.append(Neutralised(item.path, tuple(actions)))
                log.warning(
                    "git metadata left by a command was neutralised: %s: %s",
                    item.path, "; ".join(actions),
                )
        return done

    def _item(
        self, item: GitItem, exempt: set[tuple[int, int]], visited: set[tuple[int, int]]
    ) -> list[str]:
        if item.kind == "config":
            return self._config(item.path.parent, item.path.name)
        if item.kind == "repository":
            return self._gitdir(item.path, exempt, visited)
        if item.kind == "gitdir":
            return self._tree(item.path, exempt, visited)
        named = self._pointer_text(item)
        if named is None:
            return []
        if _through_proc(item.path.parent / named):
            # /proc/self/cwd and its kind lead each process somewhere else:
            # where this one would look is not where the person's git goes.
            aside = self._set_aside(item.path)
            return [f"it sends git through /proc, which leads each process elsewhere; "
                    f"moved to {aside.name}"]
        target = Path(os.path.realpath(item.path.parent / named))
        if not (self._inside(target) and target.is_dir()) or self._protected(target, exempt):
            return []
        return [f"points to {target}: {a}" for a in self._tree(target, exempt, visited)]

    def _pointer_text(self, item: GitItem) -> Path | None:
        """Where a `.git` file or link says git should go, as it says it."""
        if item.kind == "gitlink":
            try:
                return Path(os.readlink(item.path))
            except OSError:
                return None
        text = _read_small(item.path.parent, item.path.name, _MAX_POINTER_BYTES)
        if text is None or not text.startswith(b"gitdir:"):
            return None
        return Path(os.fsdecode(text[len(b"gitdir:"):].strip()))

    def _inside(self, path: Path) -> bool:
        """Whether `path` lies where a command may write (the innermost root
        holding it is writable), outside the agent's data."""
        if path.is_relative_to(self.agent_data):
            return False
        root = self.policy.root_of(path)
        return root is not None and root.writable

    def _protected(self, path: Path, exempt: set[tuple[int, int]]) -> bool:
        """Whether `path` lies in metadata that was frozen (the person's own)."""
        for folder in (path, *path.parents):
            try:
                info = os.lstat(folder)
            except OSError:
                return False
            if (info.st_dev, info.st_ino) in exempt:
                return True
            if folder in self.writable:
                return False
        return False

    def _tree(
        self, top: Path, exempt: set[tuple[int, int]], visited: set[tuple[int, int]]
    ) -> list[str]:
        """Neutralise a `.git` folder and every git folder inside it
        (submodules' `modules/*`, `worktrees/*`)."""
        actions: list[str] = []
        count = 0
        for folder, names in self._below(top):
            count += 1
            if count > _MAX_FOLDERS:
                aside = self._set_aside(top)
                return [f"too many folders to check; the whole folder was moved to {aside.name}"]
            if names & {"config", "config.worktree", "hooks", "commondir", "HEAD"}:
                prefix = os.path.relpath(folder, top)
                for action in self._gitdir(folder, exempt, visited):
                    actions.append(action if prefix == "." else f"{prefix}: {action}")
        return actions

    def _below(self, top: Path) -> Iterator[tuple[Path, set[str]]]:
        """Every folder below `top` (links not followed) with its entry names,
        skipping object stores and hooks; a folder the command made unreadable
        is opened up again, since git may still reach into it by name."""
        stack = [top]
        while stack:
            folder = stack.pop()
            try:
                entries = _listing(folder)
            except PermissionError:
                if not self.reopen(folder):
                    continue
                try:
                    entries = _listing(folder)
                except OSError:
                    continue
            except OSError:
                continue
            yield folder, set(entries)
            stack += [
                folder / name
                for name, is_dir in entries.items()
                if is_dir and name not in _SKIP_INSIDE and name != "hooks"
                and not name.endswith(_ASIDE)
            ]

    def reopen(self, folder: Path) -> bool:
        """Give the owner back read, write and search rights on a folder in a
        writable root that a command locked (mode 0300, 0000...), so that what
        it holds can be checked; True when done."""
        try:
            handle = os.open(folder, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY)
        except OSError:
            return False
        try:
            opened = Path(os.readlink(f"/proc/self/fd/{handle}"))
            info = os.fstat(handle)
            if not self._inside(opened) or info.st_uid != os.geteuid():
                return False
            os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(info.st_mode) | 0o700)
        except OSError:
            return False
        finally:
            os.close(handle)
        log.warning("a folder a command had locked was opened again for its owner: %s", folder)
        return True

    def _gitdir(
        self, folder: Path, exempt: set[tuple[int, int]], visited: set[tuple[int, int]]
    ) -> list[str]:
        """Neutralise one git folder: its configuration, its hooks, and the
        folder its `commondir` names."""
        info = os.lstat(folder)
        if (info.st_dev, info.st_ino) in visited:
            return []
        visited.add((info.st_dev, info.st_ino))
        actions: list[str] = []
        for name in _CONFIG_NAMES:
            actions += self._config(folder, name)
        fd = self._open(folder)
        if fd is not None:
            try:
                actions += _disable_hooks(fd)
            finally:
                os.close(fd)
        common = _read_small(folder, "commondir", _MAX_POINTER_BYTES)
        if common:
            target = Path(os.path.realpath(folder / os.fsdecode(common.strip())))
            if self._inside(target) and target.is_dir() and not self._protected(target, exempt):
                actions += [f"{target}: {a}" for a in self._gitdir(target, exempt, visited)]
        return actions

    def _open(self, folder: Path) -> int | None:
        """A descriptor of `folder`, provided it really lies in a writable root
        (checked on the open folder, so a link swapped into its path cannot
        send the changes elsewhere)."""
        fd = _open_folder(folder)
        if fd is None and self.reopen(folder):
            fd = _open_folder(folder)
        if fd is None:
            return None
        try:
            opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            opened = None
        if opened is None or not self._inside(opened):
            os.close(fd)
            return None
        return fd

    def _set_aside(self, path: Path) -> Path:
        fd = self._open(path.parent)
        if fd is None:
            raise OSError(f"cannot open {path.parent}")
        try:
            return path.with_name(_rename_aside(fd, path.name))
        finally:
            os.close(fd)

    def _config(self, folder: Path, name: str) -> list[str]:
        """Remove what git would execute from one configuration file."""
        fd = self._open(folder)
        if fd is None:
            return []
        try:
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return []
            signature = (info.st_mtime_ns, info.st_ctime_ns, info.st_size)
            if self._clean.get((info.st_dev, info.st_ino)) == signature:
                return []
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_CONFIG_BYTES:
                aside = _rename_aside(fd, name)
                return [f"{name} moved to {aside} (not a plain file git could read safely)"]
            data = _read_fd(fd, name, _MAX_CONFIG_BYTES)
            entries = read_config(data) if data is not None else None
            if entries is None:
                aside = _rename_aside(fd, name)
                return [f"{name} moved to {aside} (it could not be checked with git)"]
            removed = sorted({key for key, value in entries if dangerous(key, value)})
            if not removed:
                if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > _RACY_NS:
                    self._clean[(info.st_dev, info.st_ino)] = signature
                return []
            aside = _rename_aside(fd, name)
            kept = [(k, v) for k, v in entries if not dangerous(k, v)]
            text = render_config(kept)
            if read_config(text.encode("utf-8", "surrogateescape")) == kept:
                _write_new(fd, name, text.encode("utf-8", "surrogateescape"), info.st_mode)
                rest = f"the rest kept in {name}"
            else:
                rest = "no copy kept in its place"
            return [f"removed {', '.join(removed)} from {name} (original moved to {aside}; {rest})"]
        finally:
            os.close(fd)


def _disable_hooks(fd: int) -> list[str]:
    """Move aside the `hooks` of the git folder open as `fd`, unless it holds
    only git's inert `*.sample` files."""
    try:
        info = os.stat("hooks", dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return []
    names: list[str] = []
    if stat.S_ISDIR(info.st_mode):
        try:
            hooks = os.open("hooks", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:
            names = ["(a folder that cannot be read)"]  # git may still run hooks by name
        else:
            try:
                names = sorted(n for n in os.listdir(hooks) if not n.endswith(".sample"))
            finally:
                os.close(hooks)
        if not names:
            return []
    aside = _rename_aside(fd, "hooks")
    what = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "")
    what = what or "a link or a file, not a folder"
    return [f"hooks disabled ({what}); moved to {aside}"]


def _through_proc(path: Path, hops: int = 40) -> bool:
    """Whether resolving `path` as the kernel does (links followed one
    component at a time, `..` taken physically) enters /proc, where what a
    name leads to depends on the process that asks; a loop counts as yes."""
    pending = list(reversed(path.parts))
    current = Path("/")
    while pending:
        part = pending.pop()
        if part == "/":
            current = Path("/")
            continue
        if part in ("", "."):
            continue
        step = current.parent if part == ".." else current / part
        if step == Path("/proc") or step.is_relative_to("/proc"):
            return True
        if step.is_symlink():
            hops -= 1
            if hops < 0:
                return True
            try:
                pending += reversed(Path(os.readlink(step)).parts)
            except OSError:
                return True
            continue  # relative to `current`, or absolute from "/"
        current = step
    return False


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def _open_folder(folder: Path) -> int | None:
    try:
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None


def _read_fd(fd: int, name: str, cap: int) -> bytes | None:
    try:
        handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        return None
    try:
        chunks = []
        total = 0
        while total <= cap and (chunk := os.read(handle, 65536)):
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks) if total <= cap else None
    finally:
        os.close(handle)


def _read_small(folder: Path, name: str, cap: int) -> bytes | None:
    fd = _open_folder(folder)
    if fd is None:
        return None
    try:
        return _read_fd(fd, name, cap)
    finally:
        os.close(fd)


def _free_name(fd: int, name: str) -> str:
    for n in range(1, 1000):
        candidate = name + _ASIDE + ("" if n == 1 else f"-{n}")
        try:
            os.stat(candidate, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return candidate
    raise OSError(f"no free name to set {name} aside")


def _rename_aside(fd: int, name: str) -> str:
    aside = _free_name(fd, name)
    try:
        os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
    except PermissionError:
        # The command took the write right off the folder; it is the agent's own.
        os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | 0o700)
        os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
    return aside


def _listing(folder: Path) -> dict[str, bool]:
    """Entry names of a folder, each with whether it is a folder (not a link)."""
    with os.scandir(folder) as entries:
        return {e.name: e.is_dir(follow_symlinks=False) for e in entries}


def _write_new(fd: int, name: str, data: bytes, mode: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    handle = os.open(name, flags, mode & 0o644, dir_fd=fd)
    try:
        os.write(handle, data)
    finally:
        os.close(handle)
