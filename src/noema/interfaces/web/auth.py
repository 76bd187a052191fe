"""Who may use the web page: the holder of the access token, from this site only.

The token is drawn at each start, printed once and kept in the agent's
owner-only folder (`ui-token`, mode 0600) so the person can find it again.
The first visit carries it in the address (`?token=…`); the server answers
with an `HttpOnly`, `SameSite=Strict` cookie and a redirect to the same page
without it, so the token leaves the address bar and history. The cookie is
not the token: it is an HMAC of a key drawn at each start, so what a browser
keeps opens this run's page only, and the token file never opens a session
without the exchange. Every later request, the live stream included, is
checked against the cookie.

The redirect goes only to a path of this site: anything a browser could read
as another host (`//host`, `/\\host`, `/%2F…`, a scheme, a backslash or a
control character anywhere) sends the visitor to `/` instead.

Actions (every method but GET/HEAD) also need the CSRF token the page carries
in a `<meta>` tag, sent back in the `X-CSRF-Token` header, and must not come
from another site (`Origin`, `Sec-Fetch-Site`). The cookie's SameSite=Strict
already keeps other sites out; the header is a second lock that a form on
another site cannot forge.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_FILE = "ui-token"
COOKIE = "noema_ui"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True, slots=True)
class Credentials:
    """The access token of this run, and the session cookie and CSRF token
    derived from a key drawn with it (never stored, so each start rotates them)."""

    token: str
    cookie: str = COOKIE  # the cookie's name: one per agent, so two agents' pages coexist
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    @classmethod
    def fresh(cls, scope: str = "") -> Credentials:
        """A new token; `scope` (the agent's folder) names the cookie."""
        name = COOKIE + ("_" + hashlib.sha256(scope.encode()).hexdigest()[:12] if scope else "")
        return cls(secrets.token_urlsafe(32), name)

    @property
    def session(self) -> str:
        """The cookie's value: proof of a token exchange in this run, not the token."""
        return hmac.new(self.key, b"noema-session", hashlib.sha256).hexdigest()

    @property
    def csrf(self) -> str:
        """A second secret for the page's actions, derived so it needs no storage."""
        return hmac.new(self.key, b"noema-csrf", hashlib.sha256).hexdigest()

    def is_token(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.token.encode())

    def is_session(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(),
                                                             self.session.encode())

    def is_csrf(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.csrf.encode())


def keep_token(folder: Path, credentials: Credentials) -> Path:
    """Write the token to the agent's folder, readable by its owner only
    (replacing the previous run's atomically)."""
    path = folder / TOKEN_FILE
    temporary = folder / f".{TOKEN_FILE}.{os.getpid()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask may not be the default
        os.write(fd, credentials.token.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    return path


class TokenGuard:
    """ASGI middleware: refuses every request without the token, and every
    action without the CSRF token or from another site."""

    def __init__(self, app: ASGIApp, credentials: Credentials) -> None:
        self.app = app
        self.credentials = credentials

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        offered = dict(query).get("token")
        if offered is not None:
            if not self.credentials.is_token(offered):
                await _refuse(send, 403, "That access token is not this server's. Open the address "
                                         "`noema ui` printed, or read the token from ui-token in "
                                         "the agent's folder.")
                return
            if scope["method"] in SAFE_METHODS:
                await self._welcome(scope, send, [(k, v) for k, v in query if k != "token"])
                return
        cookie = _cookie(headers.get("cookie", ""), self.credentials.cookie)
        if offered is None and cookie is None:
            await _refuse(send, 401, "This page needs its access token: open the address "
                                     "`noema ui` printed (it ends in ?token=…).")
            return
        if offered is None and not self.credentials.is_session(cookie):
            await _refuse(send, 403, "This browser's session is not this run's (an earlier "
                                     "start's, or made up). Open the address `noema ui` "
                                     "printed this time.")
            return
        if scope["method"] not in SAFE_METHODS:
            problem = self._action_problem(scope, headers)
            if problem:
                await _refuse(send, 403, problem)
                return
        await self.app(scope, receive, send)

    def _action_problem(self, scope: Scope, headers: dict[str, str]) -> str | None:
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return "refused: this action came from another site"
        origin = headers.get("origin")
        if origin is not None and origin != _own_origin(scope, headers):
            return "refused: this action came from another site"
        if not self.credentials.is_csrf(headers.get(CSRF_HEADER)):
            return "refused: this action lacks the page's CSRF token; reload the page"
        return None

    async def _welcome(self, scope: Scope, send: Send, rest: list[tuple[str, str]]) -> None:
        """The first visit: the cookie, and the same page without the token in the address."""
        path = same_origin_path(scope.get("root_path", "") + scope["path"])
        # A refused path loses its query too: it was written for somewhere else.
        target = "/" if path is None else path + (f"?{urlencode(rest)}" if rest else "")
        cookie = (f"{self.credentials.cookie}={self.credentials.session}; HttpOnly; "
                  "SameSite=Strict; Path=/")
        await send({"type": "http.response.start", "status": 303, "headers": [
            (b"location", target.encode("latin-1")),
            (b"set-cookie", cookie.encode("latin-1")),
            (b"cache-control", b"no-store"),
            (b"referrer-policy", b"no-referrer"),
            (b"content-length", b"0"),
        ]})
        await send({"type": "http.response.body", "body": b""})


def same_origin_path(path: str) -> str | None:
    """`path` as a redirect target on this site, percent-encoded; None if a
    browser could read it (or a decoding of it) as anything but a local path."""
    seen = path
    for _ in range(3):  # what the browser, a proxy and the server might each decode
        # "//" anywhere and dot segments too: once a browser removes "/./", what
        # follows may start with "//"; no page of this site has either.
        if (not seen.startswith("/") or "//" in seen or "\\" in seen
                or any(segment in (".", "..") for segment in seen.split("?")[0].split("/"))
                or any(ord(c) < 0x20 or ord(c) == 0x7F for c in seen)):
            return None
        parts = urlsplit(seen)
        if parts.scheme or parts.netloc:
            return None
        decoded = unquote(seen)
        if decoded == seen:
            break
        seen = decoded
    else:
        return None  # still encoded after three decodings: no honest page needs that
    return quote(path, safe="/-._~!$&'()*+,;=:@")


def _cookie(header: str, name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed cookie header is the same as none
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def _own_origin(scope: Scope, headers: dict[str, str]) -> str:
    scheme = scope.get("scheme", "http")
    return f"{scheme}://{headers.get('host', '')}"


async def _refuse(send: Send, status: int, text: str) -> None:
    body = text.encode() + b"\n"
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]})
    await send({"type": "http.response.body", "body": body})
