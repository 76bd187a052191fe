"""Who may use the web page: the holder of the access token, from this site only.

The token is drawn at each start, printed once and kept in the agent's
owner-only folder (`ui-token`, mode 0600) so the person can find it again.
The first visit carries it in the address (`?token=…`); the server answers
with an `HttpOnly`, `SameSite=Strict` cookie and a redirect to the same page
without it, so the token leaves the address bar and history. Each exchange
opens a session of its own (`Sessions`): the cookie is a random value drawn
for that browser, kept on the server only as its hash, with a CSRF token of
its own. A session ends when its browser signs out, when another browser
ends it (the settings page lists them), and with the run: the token and
every session are drawn again at each start, so the token file never opens
a session without the exchange. Every later request, the live stream
included, is checked against the cookie.

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
import time
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_FILE = "ui-token"
COOKIE = "noema_ui"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD"})


MAX_SESSIONS = 32  # past it, the one unused longest ends: a token exchange cannot pile up


@dataclass(slots=True)
class Session:
    """One browser's session: what it is called for the person, and its CSRF token."""

    number: int  # shown to the person: "session 3"
    browser: str  # the User-Agent it signed in with, shortened
    created: float  # epoch seconds
    seen: float  # the last request it made
    csrf: str = field(repr=False)


class Sessions:
    """The browsers signed in with this run's token, kept in memory.

    A cookie value is 32 random bytes; only its SHA-256 is kept, so the list
    of sessions reveals no cookie."""

    def __init__(self) -> None:
        self._by_digest: dict[bytes, Session] = {}
        self._numbers = 0

    def open(self, browser: str, now: float | None = None) -> tuple[str, Session]:
        """A new session: the cookie value for its browser, and the session."""
        now = time.time() if now is None else now
        value = secrets.token_urlsafe(32)
        self._numbers += 1
        session = Session(self._numbers, " ".join(browser.split())[:120], now, now,
                          secrets.token_hex(32))
        self._by_digest[_digest(value)] = session
        while len(self._by_digest) > MAX_SESSIONS:
            oldest = min(self._by_digest, key=lambda d: self._by_digest[d].seen)
            del self._by_digest[oldest]
        return value, session

    def find(self, value: str | None) -> Session | None:
        """The open session a cookie value belongs to, or None."""
        if not value:
            return None
        return self._by_digest.get(_digest(value))

    def is_open(self, session: Session) -> bool:
        """Whether `session` is still open (a stream checks it before each message)."""
        return any(open_ is session for open_ in self._by_digest.values())

    def end(self, number: int) -> Session | None:
        """End session `number`; the session, or None if no open session has it."""
        for digest, session in list(self._by_digest.items()):
            if session.number == number:
                del self._by_digest[digest]
                return session
        return None

    def listing(self) -> list[Session]:
        """The open sessions, oldest first."""
        return sorted(self._by_digest.values(), key=lambda s: s.number)


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "replace")).digest()


@dataclass(frozen=True, slots=True)
class Credentials:
    """The access token of this run, and the sessions opened with it (never
    stored, so each start rotates them)."""

    token: str
    cookie: str = COOKIE  # the cookie's name: one per agent, so two agents' pages coexist
    sessions: Sessions = field(default_factory=Sessions, repr=False, compare=False)

    @classmethod
    def fresh(cls, scope: str = "") -> Credentials:
        """A new token; `scope` (the agent's folder) names the cookie."""
        name = COOKIE + ("_" + hashlib.sha256(scope.encode()).hexdigest()[:12] if scope else "")
        return cls(secrets.token_urlsafe(32), name)

    def is_token(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.token.encode())


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
                await self._welcome(scope, headers, send,
                                    [(k, v) for k, v in query if k != "token"])
                return
        cookie = _cookie(headers.get("cookie", ""), self.credentials.cookie)
        if cookie is None:
            await _refuse(send, 401, "This page needs its access token: open the address "
                                     "`noema ui` printed (it ends in ?token=…).")
            return
        session = self.credentials.sessions.find(cookie)
        if session is None:
            await _refuse(send, 403, "This browser's session has ended (it signed out, was "
                                     "ended from another browser, or belongs to an earlier "
                                     "start). Open the address `noema ui` printed this time.")
            return
        if scope["method"] not in SAFE_METHODS:
            problem = self._action_problem(scope, headers, session)
            if problem:
                await _refuse(send, 403, problem)
                return
        session.seen = time.time()
        scope.setdefault("state", {})["session"] = session  # request.state.session
        await self.app(scope, receive, send)

    def _action_problem(self, scope: Scope, headers: dict[str, str],
                        session: Session) -> str | None:
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return "refused: this action came from another site"
        origin = headers.get("origin")
        if origin is not None and origin != _own_origin(scope, headers):
            return "refused: this action came from another site"
        offered = headers.get(CSRF_HEADER)
        if offered is None or not hmac.compare_digest(offered.encode(), session.csrf.encode()):
            return "refused: this action lacks the page's CSRF token; reload the page"
        return None

    async def _welcome(self, scope: Scope, headers: dict[str, str], send: Send,
                       rest: list[tuple[str, str]]) -> None:
        """The first visit: a session of its own, and the same page without the token
        in the address."""
        path = same_origin_path(scope.get("root_path", "") + scope["path"])
        # A refused path loses its query too: it was written for somewhere else.
        target = "/" if path is None else path + (f"?{urlencode(rest)}" if rest else "")
        value, _ = self.credentials.sessions.open(headers.get("user-agent", ""))
        cookie = f"{self.credentials.cookie}={value}; HttpOnly; SameSite=Strict; Path=/"
        await send({"type": "http.response.start", "status": 303, "headers": [
            (b"location", target.encode("latin-1")),
            (b"set-cookie", cookie.encode("latin-1")),
            (b"cache-control", b"no-store"),
            (b"referrer-policy", b"no-referrer"),
            (b"content-length", b"0"),
        ]})
        await send({"type": "http.response.body", "body": b""})


def ending_cookie(credentials: Credentials) -> str:
    """A Set-Cookie value that makes the browser forget its session cookie."""
    return f"{credentials.cookie}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"


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
