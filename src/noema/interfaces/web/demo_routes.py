"""The first-run page's demo: start it, stop it, follow its transcript live."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .context import context_of, error
from .demo_run import DemoRun

RETRY_MS = 1000  # how soon a browser reconnects a dropped stream


def _demo(request: Request) -> DemoRun | None:
    return context_of(request).demo


async def start_demo(request: Request) -> Response:
    demo = _demo(request)
    if demo is None:
        return error(409, "the demo is offered while no model is configured; "
                          "run `noema demo` in a terminal")
    try:
        started = await demo.start()
    except OSError as exc:
        return error(500, f"the demo could not be started: {exc}")
    return JSONResponse({"ok": True, "started": started})


async def stop_demo(request: Request) -> Response:
    demo = _demo(request)
    if demo is None or not demo.running:
        return error(409, "no demo is running")
    await demo.stop()
    return JSONResponse({"ok": True, "code": demo.code})


async def demo_live(request: Request) -> Response:
    """The transcript as server-sent events: `id` is how many pieces came before
    and after this one, so a reconnecting page resumes where it stopped."""
    demo = _demo(request)
    if demo is None or (not demo.running and demo.code is None):
        return Response(status_code=204)  # nothing to follow: the browser stops asking
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    try:
        after = max(int(raw), 0)
    except ValueError:
        return error(400, "Last-Event-ID must be a whole number")

    async def frames():
        yield f"retry: {RETRY_MS}\n\n"
        async for piece in demo.follow(after):
            if piece.code is None:
                body = {"text": piece.text}
            else:
                body = {"end": True, "code": piece.code}
            yield f"id: {piece.index}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n"

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})
