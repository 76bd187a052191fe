"""The settings page: the form, saving a value, testing a model or a rule."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...config import ConfigError
from ...providers.base import ProviderError
from . import settings as settings_form
from .context import BadRequest, context_of, error, json_body, page, text_field


async def settings_page(request: Request) -> Response:
    web = context_of(request)
    try:
        sections, problem = settings_form.form(settings_form.current(web.paths)), None
    except ConfigError as exc:
        sections, problem = [], str(exc)
    return page(request, "settings.html", page="settings", sections=sections,
                problem=problem, config_file=str(web.paths.config_file))


async def save_setting(request: Request) -> Response:
    web = context_of(request)
    try:
        body = await json_body(request)
        key, value = text_field(body, "key"), body.get("value")
        if not isinstance(value, str):
            raise BadRequest("the value must be text, as `noema config set` takes it")
        await asyncio.to_thread(settings_form.save, web.paths, key, value)
    except BadRequest as exc:
        return error(400, str(exc))
    except ConfigError as exc:
        return error(400, str(exc))
    return JSONResponse({"ok": True, "text": f"{key} saved in {web.paths.config_file}; the "
                                             "agent uses it from its next start."})


async def rule_test(request: Request) -> Response:
    web = context_of(request)
    try:
        body = await json_body(request)
        fields = {name: body.get(name, "") for name in ("channel", "sender", "key", "text")}
        if not all(isinstance(v, str) for v in fields.values()):
            raise BadRequest("the event's fields are text")
        text = settings_form.which_rule(web.paths, authorised=body.get("authorised") is True,
                                        **fields)
    except BadRequest as exc:
        return error(400, str(exc))
    except (ConfigError, ValueError, TypeError) as exc:
        return error(400, f"that event cannot be tested: {exc}")
    return JSONResponse({"ok": True, "text": text})


async def test_model(request: Request) -> Response:
    web = context_of(request)
    try:
        role = text_field(await json_body(request), "role")
        if role not in ("reasoning", "chronicler"):
            raise BadRequest("role is reasoning or chronicler")
        text = await settings_form.test_connection(web.paths, role)  # type: ignore[arg-type]
    except BadRequest as exc:
        return error(400, str(exc))
    except (ConfigError, ProviderError) as exc:
        return error(409, f"the test failed: {exc}")
    return JSONResponse({"ok": True, "text": text})
