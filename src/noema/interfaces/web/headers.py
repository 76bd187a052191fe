"""Headers every response carries: a strict Content-Security-Policy and friends.

No inline script or style is allowed anywhere: the page's code comes from
`/static/` only, so text from the model or the world that slipped through as
markup still could not run.

Every answer but the static files says `Cache-Control: no-store`: pages and
API answers carry the conversation, which must not stay in a browser's or a
proxy's cache after the tab is closed.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


STATIC = "/static/"  # the page's own code and styles: the same for everyone, cacheable


class SecurityHeaders:
    """ASGI middleware adding the headers above to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        static = scope.get("path", "").startswith(STATIC)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not static:  # whatever a route said about caching, nothing is kept
                    headers = [(n, v) for n, v in headers if n.lower() != b"cache-control"]
                    headers.append((b"cache-control", b"no-store"))
                present = {name.lower() for name, _ in headers}
                extra = [(n, v) for n, v in _HEADERS if n not in present]
                message = {**message, "headers": [*headers, *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)
