"""Outside strings of a mail as the model is shown them: what the person's
mail client would let them see, with the tricks made visible.

- control, invisible and bidirectional characters are written as
  `<U+202E>` (a name like "invoice<U+202E>fdp.exe" shows what it hides);
- an address whose domain holds non-ASCII letters is shown in punycode
  with a warning, since "pаypal.com" with a Cyrillic "а" looks like the
  real one: the model, and the person reading its answer, see "xn--…";
  non-ASCII letters before the @, and a display name written as another
  address ("support@bank.example <x@elsewhere.test>"), are warned about;
- long values are cut with how much was left out, so one field cannot
  push the rest of a line (how to read the mail) out of sight.
"""

from __future__ import annotations

import email.utils

from ...perception.untrusted import escape_invisible

LOOKALIKE = "non-ASCII letters in the domain, shown in punycode: it may imitate another domain"
LOOKALIKE_NAME = "non-ASCII letters before the @: it may imitate another address"
POSING = "its name is written as an address, and not this one"


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
    """An address as shown: domain in punycode (with the warning) when it is not ASCII,
    and a warning for letters outside ASCII before the @."""
    local, at, domain = value.rpartition("@")
    if not at:
        return visible(value)
    warnings = [] if local.isascii() else [LOOKALIKE_NAME]
    shown_domain = domain
    if not domain.isascii():
        shown_domain = ascii_domain(domain)
        warnings.insert(0, LOOKALIKE)
    shown = f"{visible(local)}@{visible(shown_domain)}"
    return f"{shown} ({'; '.join(warnings)})" if warnings else shown


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
    shown = visible(name, 100)
    if not shown:
        return address(addr)
    # "support@bank.example <x@elsewhere.test>": the name poses as another address.
    posing = "@" in name and addr.lower() not in name.lower()
    return f"{shown} <{address(addr)}>" + (f" ({POSING})" if posing else "")
