"""Whether a mail that says it is from the person really is.

A From line is whatever the sender typed. What the person's mail server
found when the mail arrived is in the `Authentication-Results` header it
adds (RFC 8601); anyone can add such a header too, so only one written by
the configured server (its *authserv-id*) counts.

What is checked, precisely:

1. The From line holds exactly one address and it is one of `allow_from`
   (compared case-insensitively). Otherwise the mail is a stranger's.
2. Each of From, Sender, Reply-To, To, Cc, Subject, Date, Message-ID,
   In-Reply-To and References appears at most once (RFC 5322 §3.6). A
   second Subject or To prepended to a signed mail is what a replay with
   the attacker's words looks like, so such a mail is not the person's,
   whatever else it carries.
3. With `authentication = "off"` that is all: the From line is trusted.
4. Otherwise the *topmost* `Authentication-Results` header whose authserv-id
   equals the trusted one (`authserv_id`, default the IMAP host; compared
   case-insensitively) decides. The receiving server prepends its header,
   so a forged one carried in the mail sits below it; RFC 8601 §5 also
   asks that server to delete forged headers bearing its own id. Headers of
   any other authserv-id are ignored.
5. That header must report at least one of, for the From domain *D* (a
   domain is aligned with *D* when it equals *D* or *D* is a subdomain of
   it: `mail.example.org` is aligned with `example.org`):
   - `dkim=pass` with `header.d` aligned, *and* a `DKIM-Signature` header
     of that domain (the one named by `header.s`/`header.b` when the
     result gives them; otherwise every one of that domain) whose `h=` tag
     signs From and each of Subject, To, Cc, Date and Reply-To that the
     mail shows. A valid signature over other headers proves nothing about
     the ones the model reads;
   - `spf=pass` with `smtp.mailfrom` (an address or a domain) aligned
     (the envelope sender's domain allowed the sending host);
   - `dmarc=pass` with `header.from` equal to *D*, when no DKIM-Signature
     of an aligned domain is present or one covers the shown headers as
     above (a DMARC pass through DKIM is only as good as what was signed);
   - `auth=pass` with `smtp.auth` equal to the From address or its local
     part (the sender logged in to the person's own server to send it).
6. No trusted header at all: `"require"` makes the mail a stranger's, and
   so does `"auto"` when `authserv_id` is set in the configuration (the
   person said which server vouches; its silence is no proof), or when the
   mail carries results of another server (one that adds results exists:
   the reason names it, for the person to set `authserv_id`). With
   `"auto"`, no `authserv_id` and no results header at all (a server that
   adds none, such as a plain local Dovecot) the From line is trusted.

7. What the pass vouches for (`Coverage`, for an answer to a question,
   which must be bound to its question by something the server checked):
   an SPF or login pass, or a DMARC pass with no aligned signature, means
   the mail came the person's own way, so all of it; a DKIM pass (or a
   DMARC pass beside aligned signatures) only the headers every such
   signature names in `h=`, and the body unless one of them signs only its
   first bytes (`l=`); a From line trusted by the settings, all of it.

What is not checked here: DKIM signatures and SPF records themselves (the
server did that; its verdict is taken), DMARC policy, ARC chains, the
Received path. Replays and automatic mail are judged elsewhere
(`provenance.py`): they never carry authority, whatever this verdict says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email.message import Message
from typing import Literal

Mode = Literal["auto", "require", "off"]
_COMMENT = re.compile(r"\([^()]*\)")
# Headers RFC 5322 allows once; two of one are a forgery's mark.
SINGLE_HEADERS = ("From", "Sender", "Reply-To", "To", "Cc", "Subject", "Date", "Message-ID",
                  "In-Reply-To", "References")
# What the model is shown of a mail, so what a DKIM pass must have signed (From always).
SHOWN_HEADERS = ("subject", "to", "cc", "date", "reply-to")


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
class Coverage:
    """The parts of a mail a verdict vouches the person wrote."""

    whole: bool = False  # every part: the mail came the person's own way
    headers: frozenset[str] = frozenset()  # lower-case names of the headers signed
    body: bool = False  # the body, signed whole

    def covers(self, part: str) -> bool:
        """Whether `part` ("body", or a header's name) is vouched for."""
        part = part.lower()
        if self.whole:
            return True
        return self.body if part == "body" else part in self.headers


NOTHING = Coverage()
WHOLE = Coverage(whole=True)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Who a mail is from, as far as the agent can tell."""

    person: bool  # the person speaking
    claimed: bool  # the From line names one of the person's addresses
    reason: str  # one line: why
    authenticated: bool = False  # the trusted server vouched (not only the From line)
    coverage: Coverage = NOTHING  # what of the mail that vouches for (the person's only)


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
                props[name.lower()] = val.strip('"')
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


def duplicated(message: Message) -> list[tuple[str, int]]:
    """The headers RFC 5322 allows once that the mail carries several times, and how often."""
    found = []
    for name in SINGLE_HEADERS:
        count = len(message.get_all(name) or [])
        if count > 1:
            found.append((name, count))
    return found


@dataclass(frozen=True, slots=True)
class Signature:
    """The tags of a DKIM-Signature header that say what it signed."""

    domain: str  # d=, lower case
    selector: str  # s=, lower case
    b: str  # the signature, spaces removed
    signed: frozenset[str]  # h=, lower-case header names
    body_limit: int | None = None  # l=: only this many bytes of the body are signed


def dkim_signatures(message: Message) -> list[Signature]:
    """The DKIM-Signature headers of a mail, as far as they can be read."""
    found = []
    for value in message.get_all("DKIM-Signature") or []:
        tags: dict[str, str] = {}
        for part in str(value).split(";"):
            name, eq, val = part.partition("=")
            if eq:
                tags[name.strip().lower()] = "".join(val.split())
        found.append(Signature(tags.get("d", "").lower(), tags.get("s", "").lower(),
                               tags.get("b", ""),
                               frozenset(h.strip().lower() for h in tags.get("h", "").split(":")
                                         if h.strip()),
                               _length(tags.get("l"))))
    return found


def _length(value: str | None) -> int | None:
    """An l= tag's byte count; one that cannot be read limits the body to nothing."""
    if value is None:
        return None
    return int(value) if value.isdigit() else 0


def _common(signatures: list[Signature]) -> Coverage:
    """What every one of `signatures` covers (unknown which the server checked)."""
    if not signatures:
        return NOTHING
    headers = frozenset.intersection(*(s.signed for s in signatures))
    return Coverage(headers=headers, body=all(s.body_limit is None for s in signatures))


def _shown(message: Message) -> set[str]:
    return {"from"} | {name for name in SHOWN_HEADERS if message.get(name) is not None}


def _covers(signature: Signature, shown: set[str]) -> bool:
    return shown <= signature.signed


def _named_signatures(message: Message, domain: str, selector: str = "",
                      b: str = "") -> list[Signature]:
    """The DKIM signature(s) of `domain` a result names (by selector and signature)."""
    return [s for s in dkim_signatures(message) if s.domain == domain
            and (not selector or s.selector == selector)
            and (not b or s.b.startswith(b))]


def _signatures_cover(message: Message, domain: str, selector: str = "", b: str = "") -> bool:
    """Whether the DKIM signature(s) of `domain` the result names sign every shown header."""
    chosen = _named_signatures(message, domain, selector, b)
    shown = _shown(message)
    return bool(chosen) and all(_covers(s, shown) for s in chosen)


_HOST = re.compile(r"[a-z0-9][a-z0-9.-]{0,99}")


def _other_ids(message: Message) -> list[str]:
    """The authserv-ids of the mail's results headers (plain host names only, at most 3)."""
    found: list[str] = []
    for value in message.get_all("Authentication-Results") or []:
        parsed = parse_auth_results(str(value))
        if parsed is not None and _HOST.fullmatch(parsed.authserv_id) and (
                parsed.authserv_id not in found):
            found.append(parsed.authserv_id)
    return found[:3]


def _aligned(domain: str, claimed: str) -> bool:
    domain = domain.rsplit("@", 1)[-1].strip(".").lower()
    return bool(domain) and (claimed == domain or claimed.endswith("." + domain))


def passes(results: AuthResults, address: str, message: Message | None = None) -> str | None:
    """The first result that vouches for `address`, as 'dkim=pass', or None.
    With `message`, a DKIM pass counts only if its signature covers the shown headers."""
    found = vouching(results, address, message)
    return found[0][0] if found else None


def vouching(results: AuthResults, address: str,
             message: Message | None = None) -> list[tuple[str, Coverage]]:
    """Every result that vouches for `address`, as ('dkim=pass', what it covers), in
    the header's order. With `message`, a DKIM pass counts only if its signature
    covers the shown headers (without it, no DKIM pass covers anything)."""
    local, _, domain = address.lower().partition("@")
    found: list[tuple[str, Coverage]] = []
    for r in results.results:
        if r.result != "pass":
            continue
        props = {k: (v if k == "header.b" else v.lower()) for k, v in r.properties.items()}
        if r.method == "dkim" and _aligned(props.get("header.d", ""), domain):
            named = props["header.d"].strip(".")
            selector, b = props.get("header.s", ""), props.get("header.b", "")
            if message is None:
                found.append(("dkim=pass", NOTHING))
            elif _signatures_cover(message, named, selector, b):
                found.append(("dkim=pass",
                              _common(_named_signatures(message, named, selector, b))))
        if r.method == "spf" and _aligned(props.get("smtp.mailfrom", ""), domain):
            found.append(("spf=pass", WHOLE))
        if r.method == "dmarc" and props.get("header.from", "") == domain:
            aligned = [s for s in dkim_signatures(message) if _aligned(s.domain, domain)] \
                if message is not None else []
            if not aligned:  # passed by SPF alignment: the mail came the person's way
                found.append(("dmarc=pass", WHOLE))
            elif any(_covers(s, _shown(message)) for s in aligned):
                found.append(("dmarc=pass", _common(aligned)))
        if r.method == "auth" and props.get("smtp.auth", "") in (address.lower(), local):
            found.append(("auth=pass", WHOLE))
    return found


def _broadest(found: list[tuple[str, Coverage]]) -> tuple[str, Coverage]:
    """The pass that vouches for the most: one for the whole mail if there is one."""
    for method, coverage in found:
        if coverage.whole:
            return method, coverage
    return found[0]


_TOKEN = re.compile(r"[a-z0-9._-]{1,20}")


def _summary(results: AuthResults) -> str:
    """The methods and results in a few words. The header's text is outside text (a
    forged one may bear the trusted id when the server added none), so only short
    plain tokens are repeated, and at most eight of them."""
    shown = [f"{r.method}={r.result}" for r in results.results[:8]
             if _TOKEN.fullmatch(r.method) and _TOKEN.fullmatch(r.result)]
    more = len(results.results) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "") if shown else (
        "no results")


def judge(message: Message, senders: tuple[str, ...], allow_from: tuple[str, ...],
          mode: Mode, authserv_id: str, *, authserv_configured: bool = False) -> Verdict:
    """Whether `message` (From addresses `senders`) is the person speaking.

    `authserv_configured`: the person named the trusted server, so under
    "auto" its results are required."""
    if len(senders) != 1 or senders[0] not in allow_from:
        claimed = any(s in allow_from for s in senders)
        why = "more than one From address" if claimed else "not one of the person's addresses"
        return Verdict(False, claimed, why)
    address = senders[0]
    try:
        twice = duplicated(message)
    except Exception:  # a header the parser chokes on proves nothing
        return Verdict(False, True, "its headers could not be read")
    if twice:
        listed = " and ".join(f"{count} {name}" for name, count in twice)
        return Verdict(False, True, f"it carries {listed} headers, where a mail has one of "
                                    "each (the mark of headers added to someone else's mail)")
    if mode == "off":
        return Verdict(True, True, "the From line is trusted ([mail] authentication = off)",
                       coverage=WHOLE)
    try:
        results = trusted_results(message, authserv_id)
    except Exception:
        return Verdict(False, True, "its Authentication-Results could not be read")
    if results is None:
        if mode == "require" or authserv_configured:
            return Verdict(False, True, f"no Authentication-Results from {authserv_id}")
        others = _other_ids(message)
        if others:  # a server that adds results exists, and it is not the one trusted
            return Verdict(False, True, f"no Authentication-Results from {authserv_id}, only "
                                        f"from {', '.join(others)} (if that is your server, "
                                        "set [mail] authserv_id to it)")
        return Verdict(True, True, f"no Authentication-Results from {authserv_id} to check",
                       coverage=WHOLE)
    try:
        found = vouching(results, address, message)
    except Exception:
        found = []
    if not found:
        return Verdict(False, True, f"{authserv_id} found no pass for {address} that covers "
                                    f"what the mail shows ({_summary(results)})")
    vouch, coverage = _broadest(found)
    return Verdict(True, True, f"{authserv_id}: {vouch}", authenticated=True, coverage=coverage)
