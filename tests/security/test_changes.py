"""The change feed reports what changed, and asks for a full scan when unsure."""

from __future__ import annotations

import os
from pathlib import Path

from noema.security.changes import EVERYTHING, AlwaysRescan, InotifyFeed, watch


def feed_for(root: Path) -> InotifyFeed:
    feed = InotifyFeed(root, lambda rel: rel.rsplit("/", 1)[-1] in (".git", "ignored"))
    assert feed.take() is EVERYTHING  # the first answer is always a full scan
    return feed


def test_reports_changed_files(tmp_path: Path):
    (tmp_path / "a.txt").write_text("1")
    (tmp_path / "sub").mkdir()
    feed = feed_for(tmp_path)
    assert feed.take() == frozenset()
    (tmp_path / "a.txt").write_text("2")
    (tmp_path / "sub" / "b.txt").write_text("new")
    (tmp_path / "a.txt").chmod(0o600)
    assert feed.take() == {"a.txt", "sub/b.txt"}
    assert feed.take() == frozenset()
    feed.close()


def test_new_folders_are_watched(tmp_path: Path):
    feed = feed_for(tmp_path)
    (tmp_path / "n" / "m").mkdir(parents=True)
    assert "n" in feed.take()
    (tmp_path / "n" / "m" / "deep.txt").write_text("x")
    assert feed.take() == {"n/m/deep.txt"}
    feed.close()


def test_skipped_folders_are_not_watched(tmp_path: Path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "ignored").mkdir()
    feed = feed_for(tmp_path)
    (tmp_path / ".git" / "index").write_text("x")
    (tmp_path / "ignored" / "cache").write_text("x")
    assert feed.take() == frozenset()
    feed.close()


def test_moved_folder_asks_for_a_full_scan(tmp_path: Path):
    (tmp_path / "a").mkdir()
    feed = feed_for(tmp_path)
    os.rename(tmp_path / "a", tmp_path / "b")
    assert feed.take() is EVERYTHING
    (tmp_path / "b" / "x.txt").write_text("x")  # watches were rebuilt under the new name
    assert feed.take() == {"b/x.txt"}
    feed.close()


def test_fallback_always_rescans(tmp_path: Path):
    feed = AlwaysRescan()
    assert feed.take() is EVERYTHING and feed.take() is EVERYTHING
    missing = watch(tmp_path / "does-not-exist", lambda rel: False)
    assert missing.take() is EVERYTHING
    missing.close()
