"""Whether a mail that says it is from the person really is.

A From line is whatever the sender typed. What the person's mail server
found when the mail arrived is in the `Authentication-Results` header it
adds (RFC 8601); anyone can add such a header too, so only one written by
the configured server (its *authserv-id*) counts.

What is checked, precisely:

1. The From line holds exactly one address and it is one of `allow_from`
   (compared case-insensitively). Otherwise the mail is a stranger's.
2. With `authentication = "off"` that is all: the From line is trusted.
3. Otherwise the *topmost* `Authentication-Results` header whose authserv-id
   equals the trusted one (`authserv_id`, default the IMAP host; compared
   case-insensitively) decides. The receiving server prepends its header,
   so a forged one carried in the mail sits below it; RFC 8601 §5 also
   asks that server to delete forged headers bearing its own id. Headers of
   any other authserv-id are ignored.
4. That header must report at least one of, for the From domain *D* (a
   domain is aligned with *D* when it equals *D* or *D* is a subdomain of
   it: `mail.example.org` is aligned with `example.org`):
   - `dkim=pass` with `header.d` aligned (a valid signature by D);
   - `spf=pass` with `smtp.mailfrom` (an address or a domain) aligned
     (the envelope sender's domain allowed the sending host);
   - `dmarc=pass` with `header.from` equal to *D*;
   - `auth=pass` with `smtp.auth` equal to the From address or its local
     part (the sender logged in to the person's own server to send it).
5. No trusted header at all: with `authentication = "auto"` (the default)
   the From line is trusted, since the server adds no results to check;
   with `"require"` the mail is a stranger's.

What is not checked: DKIM signatures and SPF records themselves (the
server did that; its verdict is taken), DMARC policy, ARC chains, the
Received path, nor whether the person's server strips forged headers. With
"auto", a server that adds results only to some mails leaves the others
trusted on their From line: choose "require" when the server always adds
them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email.message import Message
from typing import Literal

Mode = Literal["auto", "require", "off"]
_COMMENT = re.compile(r"\([^()]*\)")


@dataclass(frozen=True, slots=True)
class Result:
    """One method's outcome in an Authentication-Results header."""

    method: str  # dkim, spf, dmarc, auth…
    result: str  # pass, fail, softfail, none…
    properties: dict[str, str] = field(default_factory=dict)  # "header.d" → "example.org"


@dataclass(frozen=True, slots=True)
class AuthResults:
    """A parsed Authentication-Results header."""

    authserv_id: str
    results: tuple[Result, ...]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Who a mail is from, as far as the agent can tell."""

    person: bool  # the person speaking
    claimed: bool  # the From line names one of the person's addresses
    reason: str  # one line: why


def _strip_comments(text: str) -> str:
    previous = None
    while previous != text:  # nested comments come off from the inside out
        previous, text = text, _COMMENT.sub(" ", text)
    return text


def parse_auth_results(value: str) -> AuthResults | None:
    """An `Authentication-Results` header value, or None if it is unreadable."""
    parts = [p.strip() for p in _strip_comments(" ".join(value.split())).split(";")]
    if not parts or not parts[0]:
        return None
    authserv = parts[0].split()[0].strip().lower()
    results = []
    for part in parts[1:]:
        tokens = part.split()
        if not tokens or "=" not in tokens[0]:
            continue  # "none", or garbage
        method, result = tokens[0].split("=", 1)
        props = {}
        for token in tokens[1:]:
            if "=" in token:
                name, val = token.split("=", 1)
                props[name.lower()] = val.strip('"').lower()
        results.append(Result(method.split("/")[0].lower(), result.lower(), props))
    return AuthResults(authserv, tuple(results))


def trusted_results(message: Message, authserv_id: str) -> AuthResults | None:
    """The topmost Authentication-Results written by `authserv_id`, or None."""
    wanted = authserv_id.strip().lower()
    for value in message.get_all("Authentication-Results") or []:
        parsed = parse_auth_results(str(value))
        if parsed is not None and parsed.authserv_id == wanted:
            return parsed
    return None


def _aligned(domain: str, claimed: str) -> bool:
    domain = domain.rsplit("@", 1)[-1].strip(".").lower()
    return bool(domain) and (claimed == domain or claimed.endswith("." + domain))


def passes(results: AuthResults, address: str) -> str | None:
    """The first result that vouches for `address`, as 'dkim=pass', or None."""
    local, _, domain = address.lower().partition("@")
    for r in results.results:
        if r.result != "pass":
            continue
        props = r.properties
        if r.method == "dkim" and _aligned(props.get("header.d", ""), domain):
            return "dkim=pass"
        if r.method == "spf" and _aligned(props.get("smtp.mailfrom", ""), domain):
            return "spf=pass"
        if r.method == "dmarc" and props.get("header.from", "") == domain:
            return "dmarc=pass"
        if r.method == "auth" and props.get("smtp.auth", "") in (address.lower(), local):
            return "auth=pass"
    return None


def _summary(results: AuthResults) -> str:
    return ", ".join(f"{r.method}={r.result}" for r in results.results) or "no results"


def judge(message: Message, senders: tuple[str, ...], allow_from: tuple[str, ...],
          mode: Mode, authserv_id: str) -> Verdict:
    """Whether `message` (From addresses `senders`) is the person speaking."""
    if len(senders) != 1 or senders[0] not in allow_from:
        claimed = any(s in allow_from for s in senders)
        why = "more than one From address" if claimed else "not one of the person's addresses"
        return Verdict(False, claimed, why)
    address = senders[0]
    if mode == "off":
        return Verdict(True, True, "the From line is trusted ([mail] authentication = off)")
    try:
        results = trusted_results(message, authserv_id)
    except Exception:  # a header the parser chokes on proves nothing
        return Verdict(False, True, "its Authentication-Results could not be read")
    if results is None:
        if mode == "require":
            return Verdict(False, True, f"no Authentication-Results from {authserv_id}")
        return Verdict(True, True, f"no Authentication-Results from {authserv_id} to check")
    vouch = passes(results, address)
    if vouch is None:
        return Verdict(False, True, f"{authserv_id} found no pass for {address} "
                                    f"({_summary(results)})")
    return Verdict(True, True, f"{authserv_id}: {vouch}")
