"""The open guard's pieces: its filter (run by the small BPF interpreter of
`test_seccomp`), the walk that resolves a path as a sandboxed process sees
it, the names a renamed folder had, reading a path out of a process, and the
policy's secrets as the guard asks for them. The attacks under `attacks/`
run the whole guard against real commands."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.security.open_guard import (
    Renames,
    _int,
    _Memory,
    _Task,
    _View,
    as_path,
    join,
    parts_of,
    policy_secrets,
)
from noema.security.policy import AccessPolicy, Root
from noema.security.seccomp import guard_program, guarded_calls, program
from noema.security.settings import DEFAULT_DENY

from .test_seccomp import ALLOW, EPERM, I386, X86_64, interpret

NOTIFY = 0x7FC00000
GUARDED_X86_64 = {2, 257, 85, 86, 265, 82, 264, 316}
GUARDED_I386 = {5, 295, 8, 9, 303, 38, 302, 353}


@given(st.integers(0, 500), st.sampled_from([X86_64, I386, 0xC00000B7]))
def test_the_guard_filter_hands_over_exactly_the_calls_that_reach_files_by_name(nr, arch):
    verdict = interpret(guard_program("x86_64"), arch, nr, (0,) * 6)
    guarded = {X86_64: GUARDED_X86_64, I386: GUARDED_I386}.get(arch, set())
    assert verdict == (NOTIFY if nr in guarded else ALLOW)


def test_the_guard_knows_each_architecture_s_numbers():
    calls = guarded_calls("x86_64")
    assert calls[(X86_64, 257)] == "openat" and calls[(I386, 5)] == "open"
    assert calls[(X86_64, 316)] == "renameat2"
    arm = guarded_calls("aarch64")
    assert set(arm.values()) == {"openat", "linkat", "renameat", "renameat2"}
    assert interpret(guard_program("aarch64"), 0xC00000B7, 56, (0,) * 6) == NOTIFY


@pytest.mark.parametrize(("arch", "nr"), [(X86_64, 317), (I386, 354)])
def test_the_sandbox_filter_refuses_a_listener_of_the_command_s_own(arch, nr):
    code = program(network=True, machine="x86_64")
    assert interpret(code, arch, nr, (1, 8, 0, 0, 0, 0)) == EPERM  # NEW_LISTENER
    assert interpret(code, arch, nr, (1, 8 | 1, 0, 0, 0, 0)) == EPERM
    assert interpret(code, arch, nr, (1, 0, 0, 0, 0, 0)) == ALLOW  # a plain filter
    assert interpret(code, arch, nr, (1, 1, 0, 0, 0, 0)) == ALLOW  # TSYNC


def test_descriptors_and_flags_are_read_as_the_kernel_reads_them():
    assert _int(0xFFFFFF9C) == -100  # AT_FDCWD from a 32-bit register
    assert _int(0xDEAD_0000_0000_0003) == 3  # high half of a 64-bit register: ignored
    assert _int(0o100) == 0o100


def test_paths_join_and_split_as_the_kernel_walks_them():
    assert join("/ws/sub", "../x") == "/ws/sub/../x"
    assert join("/ws", "/etc/passwd") == "/etc/passwd"
    assert join("/", "a") == "/a"
    assert parts_of("//a/./b//../c/") == ["a", "b", "..", "c"]
    assert as_path([]) == "/" and as_path(["a", "b"]) == "/a/b"


def test_a_renamed_folder_keeps_every_name_it_had():
    renames = Renames()
    renames.note("/ws/secrets", "/ws/a")
    renames.note("/ws/a", "/ws/b")
    assert set(renames.names("/ws/b/key")) == {"/ws/b/key", "/ws/a/key", "/ws/secrets/key"}
    assert renames.names("/ws/bb/key") == ["/ws/bb/key"]  # a prefix of a name is not the name
    assert set(renames.names("/ws/a")) == {"/ws/a", "/ws/secrets"}


def _view_in(root: Path) -> _View:
    """A view whose root is `root`, as a chrooted process's would be."""
    view = _View.__new__(_View)
    view.task = _Task(os.getpid(), b"Name:\tx\nUmask:\t0022\nNStgid:\t99\t5\nNSpid:\t98\t7\n")
    view.root = os.open(root, os.O_PATH | os.O_DIRECTORY)
    return view


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("inside\n")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "file").write_text("x")
    (tmp_path / "ws" / "abs").symlink_to("/etc/passwd")
    (tmp_path / "ws" / "rel").symlink_to("../etc/passwd")
    (tmp_path / "ws" / "up").symlink_to("../../../../..")
    (tmp_path / "ws" / "loop").symlink_to("loop")
    (tmp_path / "ws" / "dangling").symlink_to("new-file")
    view = _view_in(tmp_path)
    yield view
    view.close()


def _read(found) -> str:
    try:
        return os.read(os.open(f"/proc/self/fd/{found.fd}", os.O_RDONLY), 100).decode()
    finally:
        found.close()


def test_an_absolute_link_resolves_in_the_process_s_root_not_the_supervisor_s(tree):
    found = tree.walk("/ws/abs", follow=True)
    assert found.path == "/etc/passwd"
    assert _read(found) == "inside\n"  # the root's own, not the host's


def test_dot_dot_and_relative_links_stop_at_the_root(tree):
    found = tree.walk("/ws/rel", follow=True)
    assert found.path == "/etc/passwd" and _read(found) == "inside\n"
    found = tree.walk("/ws/up/etc/passwd", follow=True)
    assert found.path == "/etc/passwd" and _read(found) == "inside\n"
    found = tree.walk("/../../ws/./file", follow=True)
    assert found.path == "/ws/file" and _read(found) == "x"


def test_a_link_is_followed_only_when_asked(tree):
    found = tree.walk("/ws/abs", follow=False)
    try:
        assert found.path == "/ws/abs"
        assert os.readlink("", dir_fd=found.fd) == "/etc/passwd"
    finally:
        found.close()


def test_a_loop_of_links_is_refused(tree):
    with pytest.raises(OSError) as caught:
        tree.walk("/ws/loop", follow=True)
    assert caught.value.errno == errno.ELOOP


def test_a_missing_file_gives_its_folder_and_name_even_through_a_dangling_link(tree):
    found = tree.walk("/ws/dangling", follow=True)
    try:
        assert found.fd is None and found.name == "new-file" and found.path == "/ws/new-file"
        folder = Path(f"/proc/self/fd/{tree.root}") / "ws"
        assert os.path.samestat(os.fstat(found.parent), os.stat(folder))
    finally:
        found.close()
    with pytest.raises(FileNotFoundError):
        tree.walk("/ws/nothing/deeper", follow=True)
    with pytest.raises(NotADirectoryError):
        tree.walk("/ws/file/deeper", follow=True)


def test_proc_self_is_the_process_s_own_number_in_its_namespace(tmp_path):
    (tmp_path / "proc" / "5" / "task" / "7").mkdir(parents=True)
    (tmp_path / "proc" / "5" / "status").write_text("five\n")
    (tmp_path / "proc" / "5" / "task" / "7" / "status").write_text("seven\n")
    view = _view_in(tmp_path)
    try:
        found = view.walk("/proc/self/status", follow=True)
        assert found.path == "/proc/5/status" and _read(found) == "five\n"
        found = view.walk("/proc/thread-self/status", follow=True)
        assert found.path == "/proc/5/task/7/status" and _read(found) == "seven\n"
    finally:
        view.close()


def test_a_descriptor_under_proc_is_followed_to_what_it_holds(tmp_path):
    """/proc/PID/fd/N: the object the process holds, by the name it has now."""
    (tmp_path / "kept").write_text("held\n")
    holder = os.open(tmp_path / "kept", os.O_RDONLY)
    view = _View.__new__(_View)
    me = str(os.getpid()).encode()
    view.task = _Task(os.getpid(), b"Name:\tx\nNStgid:\t" + me + b"\nNSpid:\t" + me + b"\n")
    view.root = os.open("/", os.O_PATH | os.O_DIRECTORY)
    try:
        os.rename(tmp_path / "kept", tmp_path / "renamed")
        found = view.walk(f"/proc/self/fd/{holder}", follow=True)
        assert found.path == str(tmp_path / "renamed") and _read(found) == "held\n"
        read_end, write_end = os.pipe()
        found = view.walk(f"/proc/{os.getpid()}/fd/{read_end}", follow=True)
        assert found.path == f"/proc/{os.getpid()}/fd/{read_end}"  # a pipe: no path of its own
        found.close()
        os.close(read_end)
        os.close(write_end)
    finally:
        os.close(holder)
        view.close()


def test_a_path_is_read_out_of_a_process_across_a_page_boundary():
    buffer = ctypes.create_string_buffer(3 * 4096)
    base = ctypes.addressof(buffer)
    start = (base // 4096 + 1) * 4096 - 3  # three bytes before a page ends
    ctypes.memmove(start, b"/ws/a-long-name\0", 16)
    assert _Memory(os.getpid()).path(start) == "/ws/a-long-name"
    ctypes.memmove(start, b"\0", 1)
    with pytest.raises(FileNotFoundError):
        _Memory(os.getpid()).path(start)
    assert _Memory(os.getpid()).path(start, empty=True) == ""
    with pytest.raises(OSError) as caught:
        _Memory(os.getpid()).path(0)
    assert caught.value.errno == errno.EFAULT


def test_a_path_longer_than_the_kernel_takes_is_refused():
    long = b"a" * 5000 + b"\0"
    buffer = ctypes.create_string_buffer(long)
    with pytest.raises(OSError) as caught:
        _Memory(os.getpid()).path(ctypes.addressof(buffer))
    assert caught.value.errno == errno.ENAMETOOLONG


def test_the_policy_s_secrets_as_the_guard_judges_them(tmp_path):
    ws = tmp_path / "ws"
    agents = tmp_path / "ws" / ".noema"
    (ws / ".git").mkdir(parents=True)
    agents.mkdir()
    policy = AccessPolicy([Root(ws, True)], DEFAULT_DENY, (agents,))
    secrets = policy_secrets(policy)
    assert secrets.named(f"{ws}/.env") and secrets.named(f"{ws}/sub/id_rsa.pub")
    assert secrets.named(f"{ws}/.noema/agents/t/secrets.toml")
    assert not secrets.named(f"{ws}/notes.txt")
    assert not secrets.named(f"{ws}/.git/config")  # read-only in the sandbox, not hidden
    assert not secrets.named("/usr/lib/os-release")  # the system: outside the roots
    assert not secrets.named("/tmp/x.env")
    assert secrets.inside(f"{ws}/notes.txt") and not secrets.inside("/usr/lib/os-release")
    (ws / "vault").mkdir()
    (ws / "vault" / ".env").write_text("s")
    (ws / "notes.txt").write_text("n")

    def known(path: Path) -> bool:
        fd = os.open(path, os.O_PATH)
        try:
            return secrets.known(fd, os.fstat(fd))
        finally:
            os.close(fd)

    assert not known(ws / "vault" / ".env")
    fd = os.open(ws / "vault" / ".env", os.O_PATH)
    secrets.note(fd, os.fstat(fd))  # refused by its name: known by identity from now on
    os.close(fd)
    os.link(ws / "vault" / ".env", ws / "other-name")
    os.rename(ws / "vault" / ".env", ws / "renamed")
    assert known(ws / "renamed") and known(ws / "other-name")
    assert not known(ws / "notes.txt")


def test_a_probe_for_a_missing_file_is_answered_without_the_walk(tree, monkeypatch):
    def no_walk(*args, **kwargs):
        raise AssertionError("walked")

    monkeypatch.setattr(tree, "walk", no_walk)
    with pytest.raises(FileNotFoundError):
        tree.resolve("/ws/nothing", follow=True, existing=True)
    monkeypatch.undo()
    # A dangling link is not surely nothing: walked, it names where a file would go.
    found = tree.resolve("/ws/dangling", follow=True, existing=True)
    assert found.fd is None and found.path == "/ws/new-file"
    found.close()
