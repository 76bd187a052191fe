"""The git configuration a command is shown: every credential replaced, the
rest as it was, and which files count as git configuration."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from noema.security.gitredact import is_git_config, redacted

TOKENS = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=8,
                 max_size=40)
PLACES = st.sampled_from([
    '[remote "origin"]\n\turl = https://{t}@example.org/r.git\n',
    '[remote "origin"]\n\turl = https://person:{t}@example.org/r.git\n',
    '[remote "up"]\n\tpushurl = ssh://person:{t}@example.org/r.git\n',
    '[url "https://x-access-token:{t}@github.com/"]\n\tinsteadOf = https://github.com/\n',
    '[http "https://example.org/"]\n\textraheader = AUTHORIZATION: basic {t}\n',
    "[sendemail]\n\tsmtpPass = {t}\n",
    "[github]\n\ttoken={t}\r\n",
])
PLAIN = (
    "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\taskPass = /usr/bin/ask\n"
    '[remote "mirror"]\n\turl = ssh://git@example.org/r.git\n\tfetch = +refs/*:refs/*\n'
    "[credential]\n\thelper = store\n"
)


@given(TOKENS, st.lists(PLACES, min_size=1, max_size=4))
def test_no_credential_survives_and_nothing_else_changes(token, places):
    text = PLAIN + "".join(p.format(t=token) for p in places)
    shown = redacted(text.encode())
    assert shown is not None and token.encode() not in shown
    assert shown.count(b"\n") == text.count("\n")
    assert shown.startswith(PLAIN.encode())  # what holds no credential is left as it was


def test_a_configuration_without_credentials_is_shown_as_it_is():
    assert redacted(PLAIN.encode()) is None
    assert redacted(b"") is None


def test_the_files_git_reads_as_configuration():
    for path in ("/ws/.git/config", "/ws/a/b/.git/config", "/ws/.git/modules/m/config",
                 "/ws/.git/worktrees/w/config.worktree", "/root/.gitconfig",
                 "/root/.config/git/config", "/srv/store.git/config", "/ws/.GIT/config"):
        assert is_git_config(path), path
    for path in ("/ws/config", "/ws/src/config", "/ws/.git/HEAD", "/ws/app.config",
                 "/etc/ssh/ssh_config"):
        assert not is_git_config(path), path
