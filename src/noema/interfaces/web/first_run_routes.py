"""The first-run form's steps: list the server's models, read a model's window,
try it, save it all, and then start the agent in this process."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ... import config as configuration
from . import first_run as form
from .context import BadRequest, context_of, error, json_body

log = logging.getLogger(__name__)

Step = Callable[..., Awaitable[dict[str, Any]]]


async def _run(request: Request, step: Step) -> dict[str, Any] | Response:
    """The step's answer, or the response that refuses it (a failure is shown
    beside its `field`)."""
    web = context_of(request)
    if web.first_run is None:
        return error(409, "a model is configured already: the settings page changes it")
    try:
        return {"ok": True, **await step(web.paths, await json_body(request))}
    except BadRequest as exc:
        return error(400, str(exc))
    except form.FieldProblem as exc:
        return JSONResponse({"ok": False, "error": str(exc), "field": exc.field},
                            status_code=400)


async def _answer(request: Request, step: Step) -> Response:
    done = await _run(request, step)
    return done if isinstance(done, Response) else JSONResponse(done)


async def models(request: Request) -> Response:
    return await _answer(request, form.models)


async def window(request: Request) -> Response:
    return await _answer(request, form.window)


async def test(request: Request) -> Response:
    return await _answer(request, form.test)


async def save(request: Request) -> Response:
    """Write it all, then start the agent here: the chat works without a restart."""
    done = await _run(request, form.save)
    if isinstance(done, Response):
        return done
    start = context_of(request).start_agent
    if start is None:
        done["next"] = "Start `noema ui` again: the agent starts with this model."
        return JSONResponse(done)
    try:
        done["next"] = await start()
        done["started"] = True
    except Exception as exc:  # the files are written: say what to do, whatever stopped it
        log.warning("the agent did not start after the first-run form: %s",
                    configuration.mask_secrets(str(exc)))
        done["next"] = (f"The agent did not start here: {configuration.mask_secrets(str(exc))}. "
                        "Fix it on the settings page, then start `noema ui` again.")
        done["started"] = False
    return JSONResponse(done)
