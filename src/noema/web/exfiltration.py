"""The exfiltration guard of the page fetch.

A fetch sends its address to a server, so an address the model composes can
carry anything the model has read (`https://x.example/?q=<a private key>`).
The guard lets an address through without a question when:
- the conversation showed it (`seen`): the model did not compose it;
- its host is one the person trusts (`[web] trusted_hosts`);
- its host is one the person named in a message, and its query string holds
  only words the person wrote (any path on that host is fine).
Any other address is the person's call (`ApprovalGate.ask`), and with nobody
to ask it is refused.

Redirects: the server of an address the conversation showed chose where it
leads, and that is followed as the fetch always did. An address the model
composed may lead through a redirector on a trusted host (`/url?q=...`) to
any other: so after a composed address, a redirect to another host is
followed only if that target would pass on its own; otherwise the fetch
stops with an error that names the target, for the model to fetch (and the
person to be asked about) as a call of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from urllib.parse import parse_qsl

from ..security.approvals import ApprovalGate, ApprovalRequest, summarize
from ..tools.errors import ToolError, shorten
from ..tools.registry import Tool, ToolContext
from .seen import Seen, SeenAddresses
from .urls import Address, read_address

_WORD = re.compile(r"\w+")
_SHOWN = 120  # characters of data quoted in a question


class Why(Enum):
    """Why an address may be fetched without a question, or that it may not."""

    SEEN = "shown in the conversation"
    TRUSTED = "a trusted host"
    PERSON_HOST = "a host the person named"
    COMPOSED = "composed by the model"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The guard's reading of one address."""

    why: Why
    address: Address

    @property
    def free(self) -> bool:
        return self.why is not Why.COMPOSED


def trusts(trusted: tuple[str, ...], host: str) -> bool:
    """Whether `host` is one of the trusted hosts ('*.x' covers x and its subdomains)."""
    for entry in trusted:
        if entry.startswith("*."):
            base = entry[2:]
            if host == base or host.endswith("." + base):
                return True
        elif host == entry:
            return True
    return False


def judge(address: Address, seen: Seen, trusted: tuple[str, ...]) -> Verdict:
    """Whether the model composed `address`, and if so what lets it through."""
    if address.key in seen.addresses:
        return Verdict(Why.SEEN, address)
    if address.userinfo:  # a name and password before the host are data like any other
        return Verdict(Why.COMPOSED, address)
    if trusts(trusted, address.host):
        return Verdict(Why.TRUSTED, address)
    if address.host in seen.person_hosts and _only_person_words(address.query, seen):
        return Verdict(Why.PERSON_HOST, address)
    return Verdict(Why.COMPOSED, address)


def _only_person_words(query: str, seen: Seen) -> bool:
    if not query:
        return True
    values = " ".join(v for _, v in parse_qsl(query, keep_blank_values=True))
    return all(w.lower() in seen.person_words for w in _WORD.findall(values))


def data_in(address: Address) -> str:
    """What in an address looks like data, in words, for the person."""
    parts = []
    if address.userinfo:
        parts.append(f"a name before the host ({shorten(address.userinfo, _SHOWN)})")
    if address.query:
        parts.append(f"the query {shorten(address.query, _SHOWN)!r} "
                     f"({len(address.query)} characters)")
    if address.path not in ("", "/"):
        parts.append(f"the path {shorten(address.path, _SHOWN)!r}")
    return " and ".join(parts) or "nothing beyond the host"


class FetchGuard:
    """Judges each address a fetch would send, and asks the person when it must."""

    def __init__(self, seen: SeenAddresses, trusted: tuple[str, ...],
                 gate: ApprovalGate) -> None:
        self.seen = seen
        self.trusted = trusted
        self.gate = gate

    def verdict(self, url: str) -> Verdict:
        """The verdict on `url`; ToolError if it is no address the fetch could send."""
        address = read_address(url)
        if address is None:
            raise ToolError(
                f"{shorten(url)} is not a web address that can be fetched; write one that "
                "starts with http:// or https:// and names a host"
            )
        return judge(address, self.seen.now(), self.trusted)

    async def admit(self, ctx: ToolContext, fetch_tool: Tool, arguments: dict,
                    url: str) -> Verdict:
        """Return once `url` may be fetched; ToolError if the person says no or cannot
        be asked. At level 'ask' the gate has just asked about this very call."""
        await self.seen.catch_up()
        verdict = self.verdict(url)
        if verdict.free or self.gate.level(fetch_tool) == "ask":
            return verdict
        a = verdict.address
        await self.gate.ask(ApprovalRequest(
            fetch_tool.name, summarize(arguments),
            f"because the address goes to {a.host} and carries {data_in(a)}: the model "
            "composed it (it was not in the conversation), and it could carry your data out",
            ctx.call_id, ctx.turn_id, ctx.lead), ctx)
        return verdict

    def redirect(self, first: Verdict, previous: str, target: str) -> None:
        """Let a redirect from `previous` to `target` be followed, or raise ToolError.

        Not a question: the fetch's time limit runs while it waits, and the
        person may take longer. The model can fetch the target itself, and
        that call is judged (and asked about) like any other.
        """
        if first.why is Why.SEEN:
            return  # the server of an address the model did not write chose this
        before, after = read_address(previous), read_address(target)
        if after is None or (before is not None and before.host == after.host):
            return  # same host: it had the data already (the fetch refuses non-web targets)
        if after.path == "/" and not after.query and not after.userinfo:
            return  # a host's front page carries nothing
        if judge(after, self.seen.now(), self.trusted).free:
            return
        raise ToolError(
            f"the address you composed for {first.address.host} redirects to another host, "
            f"{after.host}, with {data_in(after)}; the redirect was not followed, since it "
            f"could carry the person's data out. To read it anyway, call web_get_content "
            f"with {shorten(target, 300)}: the person will be asked first."
        )
