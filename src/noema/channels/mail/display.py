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
  push the rest of a line (how to read the mail) out of sight;
- a sender is its address, always: the display name comes after it,
  quoted and called a name (a name can be anything, another address too);
- outside text inside a mail the agent writes (a question to the person)
  is a block whose every line starts with `| `, so no line of it can pass
  for a line of the mail's own.
"""

from __future__ import annotations

import re
from email.header import decode_header, make_header

from ...perception.untrusted import escape_invisible

LOOKALIKE = "non-ASCII letters in the domain, shown in punycode: it may imitate another domain"
LOOKALIKE_NAME = "non-ASCII letters before the @: it may imitate another address"
POSING = "its name is written as an address, and not this one"
BLOCK_PREFIX = "| "


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


_ENCODED_WORD = re.compile(r"=\?[^?\s]+\?[bBqQ]\?[^?\s]*\?=")
_NOT_IN_ADDRESS = re.compile(r"[\s<>(),;:\"\\\[\]]")


def _decoded(value: str) -> str:
    """An address as a mail client shows one written with encoded words
    ("service@=?utf-8?q?p=d0=b0ypal?=.com"): decoded when what it decodes to is
    one plain address, else as it is."""
    if "=?" not in value:
        return value
    try:  # each word alone: inside an address nothing delimits it as a header would
        text = _ENCODED_WORD.sub(lambda m: str(make_header(decode_header(m.group(0)))), value)
    except Exception:
        return value
    if text.count("@") != 1 or _NOT_IN_ADDRESS.search(text):
        return value
    return text


def address(value: str) -> str:
    """An address as shown: domain in punycode (with the warning) when it is not ASCII,
    and a warning for letters outside ASCII before the @."""
    local, at, domain = _decoded(value).rpartition("@")
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


def sender_address(addr: str, others: tuple[str, ...] = ()) -> str:
    """The address part of a sender as shown: every address of its From line
    (a line with several cannot say which one wrote)."""
    if not others:
        return address(addr) if addr else "(no address)"
    return f"{addresses((addr, *others), 5)} ({len(others) + 1} addresses in one From line)"


def sender(name: str, addr: str, others: tuple[str, ...] = ()) -> str:
    """A sender as shown: its address (the one the From line really holds, as
    `message.addresses` parses it; all of them when it holds several), then its
    display name, decoded, quoted and called a name. "ana@example.org" as the
    name of mallory's address shows as `mallory@evil.test (name
    "ana@example.org": its name is written as an address, and not this one)`,
    never as Ana's mail."""
    shown = sender_address(addr, others)
    shown_name = visible(" ".join(name.split()), 100)
    if not shown_name:
        return shown
    # "support@bank.example <x@elsewhere.test>": the name poses as another address.
    posing = "@" in name and (not addr or addr.lower() not in name.lower())
    return f'{shown} (name "{shown_name}"' + (f": {POSING})" if posing else ")")


def block(text: str) -> str:
    """Outside text as a block inside a mail the agent writes: every line (a
    break of any kind starts one) begins with `BLOCK_PREFIX`, invisible and
    direction-changing characters are written as ⟨U+…⟩."""
    shown = escape_invisible(text, keep_newlines=True, shown="⟨U+{:04X}⟩")
    return "\n".join(BLOCK_PREFIX + line for line in shown.split("\n"))
