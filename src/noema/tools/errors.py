"""Errors a tool reports to the model, and plain words for what the operating
system says.

A leaf module: the security package and the tools both raise `ToolError`,
and neither needs the other to do it. `explain` turns an `OSError` (and the
few `ValueError`s the file functions raise for impossible paths) into one
short sentence that says what happened and what to do instead, with any
path shortened, so that a 4 KB name or raw errno text never floods the
model's context.
"""

from __future__ import annotations

import errno
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..memory.turns import Source

HEAD_CHARS = 60
TAIL_CHARS = 40


class ToolError(Exception):
    """A failure the model should read and can act on (bad path, refusal...).

    `sources`: whose outside words the message repeats, when it shows stored
    text a stranger chose (the names of a mail's attachments); None when it
    holds only the tool's words and the call's own arguments.
    """

    def __init__(self, *args: object, sources: tuple[Source, ...] | None = None) -> None:
        super().__init__(*args)
        self.sources = sources


def shorten(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """`text` fit to be quoted in a message: invisible and control characters
    escaped (so a name cannot hide `.git` or forge lines), and the middle of
    anything longer than head + tail characters replaced by an ellipsis."""
    visible = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(visible) <= head + tail + 1:
        return visible
    return f"{visible[:head]}…{visible[-tail:]}"


def quoted(text: str) -> str:
    """`text` shortened and in single quotes, for a message (its escapes not doubled)."""
    return f"'{shorten(text)}'"


_LONG_WORD = re.compile(r"\S{%d,}" % (HEAD_CHARS + TAIL_CHARS + 2))
MESSAGE_CHARS = 4000


def tidy(message: str) -> str:
    """A tool's error message as the model should get it: every run of more
    than head + tail characters without a space (a 4 KB path) shortened, and
    the whole capped, whatever module raised it."""
    short = _LONG_WORD.sub(lambda m: shorten(m.group()), message)
    if len(short) <= MESSAGE_CHARS:
        return short
    return f"{short[: MESSAGE_CHARS - 1000]}…{short[-1000:]}"  # its line breaks kept


def _where(exc: OSError) -> str:
    name = exc.filename
    if name is None:
        return "the path"
    if isinstance(name, bytes):
        name = name.decode("utf-8", "backslashreplace")
    return quoted(str(name))


# errno -> advice; "{where}" is the shortened path. One sentence each, saying
# what the model can do instead, because the raw strerror rarely does.
_ADVICE: dict[int, str] = {
    errno.ENAMETOOLONG: (
        "the name {where} is too long for the file system (at most 255 bytes per name "
        "and 4096 per path); use a shorter name"
    ),
    errno.ENOENT: "{where} does not exist (it may have just been moved or deleted); "
    "look for it with file_find",
    errno.ENOTDIR: "a part of {where} is a file, not a folder (or it changed while the "
    "tool was working); check the path with file_find",
    errno.EISDIR: "{where} is a folder, not a file; name a file inside it",
    errno.ELOOP: "{where} leads through a symbolic link or changed while it was being "
    "opened; the file tools never follow links there: use the real path",
    errno.EACCES: "the operating system does not allow access to {where}; choose "
    "another file, or ask the person to change its permissions",
    errno.EPERM: "the operating system does not allow this operation on {where}; "
    "choose another file, or ask the person to change its permissions",
    errno.ENXIO: "{where} is a special file (a socket, device or pipe), not a text file; "
    "the file tools only handle regular files and folders",
    errno.ENODEV: "{where} is a device, not a text file; the file tools only handle "
    "regular files and folders",
    errno.EEXIST: "{where} already exists; choose another name or edit the existing file",
    errno.ENOTEMPTY: "the folder {where} is not empty",
    errno.ENOSPC: "the disk is full; nothing more can be written until space is freed "
    "(tell the person)",
    errno.EDQUOT: "the disk quota is used up; nothing more can be written until space is "
    "freed (tell the person)",
    errno.EROFS: "{where} is on a read-only file system; write somewhere else",
    errno.EBUSY: "{where} is busy (in use by the system); try again later or use another path",
    errno.ETXTBSY: "{where} is a program that is running; it cannot be changed now",
    errno.EMFILE: "too many files are open at once; try again in a moment",
    errno.ENFILE: "too many files are open on the system; try again in a moment",
    errno.EXDEV: "{where} is on another file system; the operation cannot cross it",
    errno.EINVAL: "the operating system refused {where} as invalid; use a plain name "
    "(letters, digits, '-', '_', '.')",
    errno.EFBIG: "{where} would grow past the largest file this file system allows",
    errno.EIO: "the disk reported an input/output error on {where}; tell the person",
    errno.EAGAIN: "{where} is not ready to be read (a pipe or device); the file tools "
    "only handle regular files",
}


# The errors whose cause is plain from the errno alone: no traceback is logged.
KNOWN_ERRNOS = frozenset(_ADVICE)


def explain(exc: BaseException) -> str | None:
    """One short sentence for the model about an operating-system failure, or
    None when `exc` is not one (then it is a bug and is reported as such)."""
    if isinstance(exc, TimeoutError) and exc.errno is None:
        return "the operation timed out; try again later, or with less to do"
    if isinstance(exc, OSError):
        advice = _ADVICE.get(exc.errno or 0)
        named = exc.filename is not None
        if advice and (named or "{where}" not in advice):
            return advice.format(where=_where(exc))
        reason = (exc.strerror or str(exc) or type(exc).__name__).lower()
        if not named:  # a socket or a pipe, not a path
            return (
                f"the operating system refused the operation ({shorten(reason)}); try "
                "again, or tell the person"
            )
        return (
            f"the operating system refused the operation on {_where(exc)} ({reason}); "
            "try another path, or tell the person"
        )
    if isinstance(exc, UnicodeEncodeError):  # a str the OS cannot take as a name
        return (
            "a path contains characters that cannot be turned into a file name (for "
            "example a lone surrogate such as \\ud800); use ordinary text"
        )
    if isinstance(exc, ValueError) and "embedded null" in str(exc):
        return (
            "a path or name contains a NUL character (\\0), which no file name can hold; "
            "remove it"
        )
    if isinstance(exc, OverflowError):
        return "a number is too large for the operation; use a smaller value"
    return None
