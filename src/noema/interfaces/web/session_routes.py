"""The browsers signed in to the page: the list, ending one, signing out.

Each browser that exchanged the access token holds a session of its own
(`auth.Sessions`); any of them may end any other (a browser left signed in
elsewhere), and signing out ends the browser's own and makes it forget the
cookie. A browser whose session ended needs the address `noema ui` printed.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .auth import Session, ending_cookie
from .context import context_of, error, session_of


def shown(session: Session, current: Session, now: float) -> dict:
    """A session as the page lists it."""
    return {"number": session.number, "browser": session.browser or "an unnamed browser",
            "signed_in": time.strftime("%Y-%m-%d %H:%M", time.localtime(session.created)),
            "idle_s": max(0, round(now - session.seen)), "current": session is current}


async def list_sessions(request: Request) -> Response:
    """Every open session, this browser's marked."""
    current, now = session_of(request), time.time()
    sessions = context_of(request).credentials.sessions.listing()
    return JSONResponse({"sessions": [shown(s, current, now) for s in sessions]},
                        headers={"cache-control": "no-store"})


async def end_session(request: Request) -> Response:
    """End the session numbered in the path; ending this browser's own signs it out."""
    number = request.path_params["number"]
    credentials = context_of(request).credentials
    ended = credentials.sessions.end(number)
    if ended is None:
        return error(404, f"there is no open session {number}; it may have ended already")
    own = ended is session_of(request)
    text = ("Signed out: this browser's session has ended." if own else
            f"Session {number} ({ended.browser or 'an unnamed browser'}) has ended; that "
            "browser needs the address `noema ui` printed to come back.")
    response = JSONResponse({"ok": True, "text": text, "signed_out": own})
    if own:
        response.headers["set-cookie"] = ending_cookie(credentials)
    return response


async def sign_out(request: Request) -> Response:
    """End this browser's session and make it forget the cookie."""
    credentials = context_of(request).credentials
    credentials.sessions.end(session_of(request).number)
    response = JSONResponse({"ok": True, "signed_out": True,
                             "text": "Signed out: this browser's session has ended."})
    response.headers["set-cookie"] = ending_cookie(credentials)
    return response
