"""Secrets that appear, or are re-saved, while a command runs.

The masks are laid when a command starts; these attacks meet the files the
person makes after that. A second process (the person) creates `.env`, or
re-saves it the way editors and `sed -i` do (a copy renamed over the old
name, which takes the old name's mask away), while the command waits for it
and then reads it: by its name, through another name it gives it (a hard
link, a rename, a symbolic link, a descriptor of the folder), after moving
the folder a rule names, and with a second thread rewriting the path while
the first one opens it. The verdict is the canary: it must appear neither in
the command's output nor in any file it wrote.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..world import BWRAP, World
from .person import WAIT_DONE, Person

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

CANARY = "CANARY-APPEARING-7351"


async def shell(world: World, command: str) -> str:
    result = await world.call("shell_execute", command=command)
    assert not result.is_error, result.content
    return result.content


def holders(folder: Path, canary: str) -> list[str]:
    """Files below `folder` whose bytes hold the canary (git's own folders aside)."""
    found = []
    for path in folder.rglob("*"):
        if ".git" in path.parts or not path.is_file() or path.is_symlink():
            continue
        if canary.encode() in path.read_bytes():
            found.append(path.relative_to(folder).as_posix())
    return sorted(found)


async def test_a_secret_created_during_a_command_is_not_readable(world):
    with Person(world.ws, "create", ".env", CANARY):
        out = await shell(world, WAIT_DONE + "; cat .env; cp .env stolen; sed -n p .env > s2; "
                                             "grep -r CANARY . ; echo end")
    assert "end" in out, out
    assert CANARY not in out, out
    assert holders(world.ws, CANARY) == [".env"]
    assert "Permission denied" in out  # refused, not missing


async def test_a_secret_re_saved_by_rename_over_is_not_readable(world):
    (world.ws / ".env").write_text("OLD-VALUE\n")
    with Person(world.ws, "resave", ".env", CANARY):
        out = await shell(world, WAIT_DONE + "; cat .env; cp .env stolen; echo end")
    assert "end" in out, out
    assert CANARY not in out, out
    assert holders(world.ws, CANARY) == [".env"]
    assert (world.ws / ".env").read_text().startswith(CANARY)  # the person's save stood


async def test_a_command_reading_in_a_loop_while_the_person_re_saves_sees_nothing(world):
    """The race: every read of the command falls somewhere among 150 saves."""
    (world.ws / ".env").write_text("OLD-VALUE\n")
    loop = ("touch started; n=0; while [ ! -e done ] && [ $n -lt 5000 ]; do "
            "cat .env >> seen 2>/dev/null; n=$((n+1)); done; cat seen; echo reads=$n")
    with Person(world.ws, "resave", ".env", CANARY, rounds=60):
        out = await shell(world, loop)
    assert "reads=" in out, out
    assert CANARY not in out, out
    assert holders(world.ws, CANARY) == [".env"]


async def test_a_secret_that_comes_and_goes_is_never_caught(world):
    loop = ("touch started; n=0; while [ ! -e done ] && [ $n -lt 5000 ]; do "
            "cat .env >> seen 2>/dev/null; n=$((n+1)); done; echo reads=$n")
    with Person(world.ws, "flicker", ".env", CANARY, rounds=100):
        out = await shell(world, loop)
    assert "reads=" in out, out
    assert CANARY not in out and holders(world.ws, CANARY) == [], out


async def test_other_names_a_command_gives_a_new_secret_do_not_open_it(world):
    (world.ws / "sub").mkdir()
    tricks = (
        "ln .env hard; cat hard; mv .env moved; cat moved; ln -s .env soft; cat soft; "
        'ln -s "$PWD/.env" abs; cat abs; ln -s / sub/top; cat "sub/top$PWD/.env"; '
        "exec 3<.; cat /proc/self/fd/3/.env; cat /dev/fd/3/.env; cat sub/../.env; "
        "cp .env copy; echo end"
    )
    with Person(world.ws, "create", ".env", CANARY):
        out = await shell(world, WAIT_DONE + "; " + tricks)
    assert "end" in out, out
    assert CANARY not in out, out
    assert holders(world.ws, CANARY) == [".env"]  # not moved, not linked, not copied
    assert (world.ws / ".env").stat().st_nlink == 1


async def test_moving_the_folder_a_rule_names_does_not_free_what_appears_in_it(world):
    world.deny_extra = ("projects/vault",)
    (world.ws / "projects").mkdir()
    (world.ws / "projects" / "plan.txt").write_text("plan\n")
    tricks = ("mv projects p2; cat p2/vault/key.txt; mv p2/vault v3; cat v3/key.txt; "
              "cd p2 && cat vault/key.txt; cat plan.txt; echo end")
    with Person(world.ws, "create", "projects/vault/key.txt", CANARY):
        out = await shell(world, WAIT_DONE + "; " + tricks)
    assert "end" in out and "plan" in out, out  # the folder moved; what is not secret reads
    assert CANARY not in out, out
    # (a folder may move, and what it holds with it, unread)
    kept = holders(world.ws, CANARY)
    assert len(kept) == 1 and kept[0].endswith("vault/key.txt") or kept == ["v3/key.txt"], kept


# The path lies in memory the opener shares with a second process that keeps
# rewriting it ("aaaa" and ".env" are the same length): like a second thread,
# but not waiting on the first one's interpreter lock.
RACER = r"""
import ctypes, mmap, os, signal
libc = ctypes.CDLL(None, use_errno=True)
shared = mmap.mmap(-1, 4096)
shared[0:5] = b"aaaa\0"
address = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(shared)))
flipper = os.fork()
if flipper == 0:
    while True:
        shared[0:4] = b".env"
        shared[0:4] = b"aaaa"
got = set()
for _ in range(1500):
    fd = libc.open(address, os.O_RDONLY)
    if fd >= 0:
        got.add(os.read(fd, 100).decode(errors="replace").strip())
        os.close(fd)
os.kill(flipper, signal.SIGKILL)
print("contents:", sorted(got))
"""


async def test_a_thread_rewriting_the_path_during_the_open_wins_nothing(world):
    (world.ws / "aaaa").write_text("fine\n")
    (world.ws / "racer.py").write_text(RACER)
    with Person(world.ws, "create", ".env", CANARY):
        out = await shell(world, WAIT_DONE + "; python3 racer.py")
    assert "contents:" in out and "fine" in out, out
    assert CANARY not in out, out


LISTENER = r"""
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(38, 1, 0, 0, 0)
code = struct.pack("=HBBI", 0x06, 0, 0, 0x7FFF0000)  # allow everything
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
prog = Prog(1, code)
libc.syscall.restype = ctypes.c_long
fd = libc.syscall(317, 1, 8, ctypes.byref(prog))
print("listener:", fd, ctypes.get_errno())
"""


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86_64 numbers")
async def test_a_command_cannot_take_the_guards_place_with_a_listener_of_its_own(world):
    """A filter the command stacked with its own listener would receive the
    notifications first and could let every open through."""
    (world.ws / "listen.py").write_text(LISTENER)
    out = await shell(world, "python3 listen.py")
    assert "listener: -1 1" in out, out  # EPERM


async def test_a_secret_s_name_refuses_even_the_file_the_command_made(world):
    """A command may make a file under a secret's name (it gets the new, empty
    file) but never open it again: by then it may hold the person's bytes.
    Nor may it give a secret's name to a file, or a secret another name."""
    (world.ws / "sub").mkdir()
    out = await shell(world, "echo MINE-41 > sub/.env; cat sub/.env; echo x > plain; "
                             "mv plain sub/id_rsa; ln sub/.env sub/also; echo end")
    assert "end" in out and "MINE-41" not in out, out
    assert out.count("Permission denied") == 3, out
    assert (world.ws / "sub" / ".env").read_text() == "MINE-41\n"
    assert (world.ws / "plain").exists() and not (world.ws / "sub" / "also").exists()
    with Person(world.ws, "resave", "sub/.env", CANARY):
        out = await shell(world, WAIT_DONE + "; cat sub/.env")
    assert CANARY not in out, out


async def test_a_command_without_its_supervisor_opens_nothing(world, monkeypatch):
    """If the supervisor stops, the command's opens fail: none succeeds unchecked."""
    import threading

    import noema.security.sandbox as sandbox

    real = sandbox.spawn

    def stopping(*args, **kwargs):
        process, guard = real(*args, **kwargs)
        threading.Timer(1.0, guard.close).start()
        return process, guard

    monkeypatch.setattr(sandbox, "spawn", stopping)
    out = await shell(world, "sleep 3; cat notes.txt; echo rc=$?")
    assert "hello" not in out, out
    assert "rc=0" not in out and "rc=" in out, out
