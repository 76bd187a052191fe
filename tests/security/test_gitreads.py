"""What the person's git reads: the repositories found in a tree, and the
files their configurations include, kept true while the tree changes.

A walker that remembers folders (and, in a large tree, listens to the
kernel for changes) must answer as a walker that has never seen the tree:
the property test changes a tree at random and compares the two after each
change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noema.security.gitreads import Includes, Repositories, include_target


def bare(folder: Path) -> Path:
    """A git folder as `git init` makes one (HEAD, objects/, refs/, config)."""
    for name in ("objects", "refs"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "config").write_text("[core]\n\tbare = false\n")
    return folder


def found(repositories: Repositories) -> set[Path]:
    return {Path(os.path.realpath(c)) for c in repositories.configs()}


def test_repositories_of_every_kind_are_found(tmp_path):
    top = tmp_path / "top"
    bare(top / "a" / "b" / ".git")
    bare(top / "store.git")
    outside = bare(tmp_path / "kept-elsewhere")
    (top / "tree").mkdir()
    (top / "tree" / ".git").write_text(f"gitdir: {outside}\n")
    (top / "linked").mkdir()
    (top / "linked" / ".git").symlink_to(top / "store.git")
    module = bare(top / "a" / "b" / ".git" / "modules" / "nested" / "lib")
    worktree = top / "a" / "b" / ".git" / "worktrees" / "wt"
    worktree.mkdir(parents=True)
    (worktree / "HEAD").write_text("ref: refs/heads/wt\n")
    (worktree / "commondir").write_text("../..\n")
    configs = found(Repositories([top], watch_past=None))
    for gitdir in (top / "a" / "b" / ".git", top / "store.git", outside, module, worktree):
        assert gitdir / "config" in configs, gitdir
        assert gitdir / "config.worktree" in configs, gitdir


def test_the_repository_enclosing_a_root_counts(tmp_path):
    project = tmp_path / "project"
    bare(project / ".git")
    root = project / "docs" / "notes"
    root.mkdir(parents=True)
    assert project / ".git" / "config" in found(Repositories([root]))


def test_skipped_folders_are_not_walked(tmp_path):
    top = tmp_path / "top"
    bare(top / "agents" / "x" / ".git")
    assert found(Repositories([top], [top / "agents"])) == set()


def test_an_include_is_joined_as_git_joins_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert include_target("/a/b/config", "../x.inc") == "/a/b/../x.inc"
    assert include_target("/a/b/config", "~/x.inc") == f"{tmp_path}/home/x.inc"
    assert include_target("/a/b/config", "/abs/x.inc") == "/abs/x.inc"


def test_includes_are_followed_to_a_bound_and_through_loops(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    chain = [tmp_path / f"c{n}.cfg" for n in range(30)]
    for here, there in zip(chain, chain[1:], strict=False):
        here.write_text(f"[include]\n\tpath = {there.name}\n")
    chain[-1].write_text(f"[include]\n\tpath = {chain[0].name}\n")  # a loop
    reached = Includes().reach([chain[0]])
    assert chain[1] in reached and chain[12] in reached
    assert chain[25] not in reached  # past git's own limit of nested includes
    done = subprocess.run(["git", "config", "--includes", "--file", str(chain[0]), "--list"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0  # git refuses such a chain, so nothing in it is obeyed


# -- the remembering walker answers as a fresh one -------------------------------------

NAMES = st.sampled_from(["a", "b", "c"])
PLACES = st.lists(NAMES, min_size=0, max_size=3).map(tuple)
KINDS = st.sampled_from(["folder", "file", "repo", "bare", "remove", "move-in", "pointer"])
STEPS = st.lists(st.tuples(KINDS, PLACES), min_size=1, max_size=8)


def _apply(top: Path, spare: Path, step: tuple[str, tuple[str, ...]], n: int) -> None:
    kind, place = step
    where = top.joinpath(*place)
    if kind == "folder":
        where.mkdir(parents=True, exist_ok=True)
    elif kind == "file" and where.is_dir():
        (where / f"note{n}.txt").write_text("a file changes no folder's shape\n")
    elif kind == "bare" and place and not where.exists():
        bare(where)
    elif kind == "repo" and not (where / ".git").exists():
        bare(where / ".git")
    elif kind == "remove" and place and where.is_dir():
        shutil.rmtree(where)
    elif kind == "move-in" and place and not where.exists():
        # A tree made elsewhere, repository inside, renamed into place at once.
        made = spare / f"tree{n}"
        bare(made / "deep" / ".git")
        where.parent.mkdir(parents=True, exist_ok=True)
        os.rename(made, where)
    elif kind == "pointer" and not (where / ".git").exists():
        target = bare(spare / f"gitdir{n}")
        where.mkdir(parents=True, exist_ok=True)
        (where / ".git").write_text(f"gitdir: {target}\n")


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_a_remembering_walker_sees_what_a_fresh_one_sees(tmp_path_factory, steps):
    base = tmp_path_factory.mktemp("tree")
    top, spare = base / "top", base / "spare"
    top.mkdir()
    spare.mkdir()
    (top / "filler").mkdir()
    for n in range(3):
        (top / "filler" / f"f{n}").mkdir()
    # The kernel's word from the second walk on; what it read is trusted at
    # once, however recently it changed (the walker by times waits 2 s).
    watched = Repositories([top], watch_past=1, racy_s=0)
    plain = Repositories([top], watch_past=None)
    try:
        found(watched)
        found(watched)
        found(plain)
        for n, step in enumerate(steps):
            _apply(top, spare, step, n)
            expected = found(Repositories([top], watch_past=None))
            assert found(watched) == expected, (steps[: n + 1])
            assert found(plain) == expected, (steps[: n + 1])
    finally:
        watched.close()
