"""Outside strings of a mail as the model is shown them: what the person's
mail client would let them see, with the tricks made visible.

- control, invisible and bidirectional characters are written as
  `<U+202E>` (a name like "invoice<U+202E>fdp.exe" shows what it hides);
- an address whose domain holds non-ASCII letters is shown in punycode
  with a warning, since "pаypal.com" with a Cyrillic "а" looks like the
  real one: the model, and the person reading its answer, see "xn--…";
- long values are cut with how much was left out, so one field cannot
  push the rest of a line (how to read the mail) out of sight.
"""

from __future__ import annotations

import email.utils

from ...perception.untrusted import escape_invisible

LOOKALIKE = "non-ASCII letters in the domain, shown in punycode: it may imitate another domain"


def cut(text: str, limit: int) -> str:
    """`text` within `limit` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()}… ({len(text) - limit} more characters)"


def visible(text: str, limit: int | None = None) -> str:
    """One line of outside text with hidden characters shown, cut to `limit`."""
    shown = escape_invisible(text)
    return cut(shown, limit) if limit is not None else shown


def _punycode(label: str) -> str:
    if label.isascii():
        return label
    try:
        return label.encode("idna").decode("ascii")
    except UnicodeError:  # IDNA 2003 refuses it (a symbol, a length): plain punycode
        return "xn--" + label.encode("punycode").decode("ascii")


def ascii_domain(domain: str) -> str:
    """A domain with each non-ASCII label in punycode."""
    return ".".join(_punycode(label) for label in domain.split("."))


def lookalike(address: str) -> bool:
    """Whether an address's domain holds letters outside ASCII."""
    return not address.rpartition("@")[2].isascii()


def address(value: str) -> str:
    """An address as shown: domain in punycode (with the warning) when it is not ASCII."""
    local, at, domain = value.rpartition("@")
    if not at or domain.isascii():
        return visible(value)
    return f"{visible(local)}@{ascii_domain(domain)} ({LOOKALIKE})"


def addresses(values: tuple[str, ...], limit: int, more: int = 0) -> str:
    """A list of addresses, the first `limit` of them, then how many more."""
    shown = [address(a) for a in values[:limit]]
    left = len(values) - len(shown) + more
    if left > 0:
        shown.append(f"and {left} more")
    return ", ".join(shown)


def sender(display: str, fallback: str) -> str:
    """A From line as shown: its name (hidden characters visible) and its address."""
    try:
        name, addr = email.utils.parseaddr(display)
    except Exception:
        name, addr = "", ""
    if not addr:
        return visible(display or fallback, 200)
    name = visible(name, 100)
    return f"{name} <{address(addr)}>" if name else address(addr)
