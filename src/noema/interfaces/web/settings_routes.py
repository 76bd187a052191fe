"""The settings page: the forms, saving a section, the server's models, testing a
model (the last two are the setup's own steps, `setup_flow`)."""

from __future__ import annotations

import asyncio
import functools
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ... import config as configuration
from ...config import ConfigError
from ...providers.base import ProviderError
from ...providers.catalog import PROVIDERS
from ...providers.discovery import DiscoveryFailed
from ...setup_flow import SetupFailed
from . import settings as settings_form
from .context import BadRequest, context_of, error, json_body, page, session_of, text_field
from .session_routes import shown as _shown


async def settings_page(request: Request) -> Response:
    web = context_of(request)
    problems: dict[str, list[str]] = {}
    try:
        reading = settings_form.read(web.paths)
        secrets = configuration.read_secrets_file(web.paths.secrets_file)
        sections = settings_form.form(reading.config, secrets, reading.wrong)
        problem = None
        if reading.problems:  # shown beside their fields, so they can be fixed here
            problem = (f"{web.paths.config_file} has problems; the agent will not start until "
                       "they are fixed. Each is shown beside its field below.")
            fields = {f.key: f for s in sections for f in s.fields}
            problems = settings_form.by_field(list(reading.problems), fields)
            worded = settings_form.in_words(list(reading.errors), fields)
            problems.update(worded)  # the validator's words replaced where they can be
    except ConfigError as exc:
        sections, problem = [], str(exc)
    kinds = {name: spec.kind.value for name, spec in PROVIDERS.items()}
    addresses = {name: spec.base_url or "" for name, spec in PROVIDERS.items()}
    current, now = session_of(request), time.time()
    sessions = [_shown(s, current, now) for s in web.credentials.sessions.listing()]
    return page(request, "settings.html", page="settings", sections=sections,
                sessions=sessions, problem=problem, config_file=str(web.paths.config_file),
                secrets_file=str(web.paths.secrets_file), kinds=kinds, addresses=addresses,
                problems=problems)


async def save_section(request: Request) -> Response:
    """One section's form, validated with the whole file; errors beside their fields."""
    web = context_of(request)
    try:
        body = await json_body(request)
        section = text_field(body, "section")
        values, key = body.get("values"), body.get("key", "")
        if not isinstance(values, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
            raise BadRequest("values must map each dotted key to its text, as `noema config "
                             "set` takes it")
        if not isinstance(key, str):
            raise BadRequest("the key must be text")
        served = body.get("served_window")
        if served is not None and (not isinstance(served, int) or isinstance(served, bool)
                                   or served <= 0):
            raise BadRequest("served_window is the server's window, a whole number of tokens")
        saved = await asyncio.to_thread(
            functools.partial(settings_form.save_section, web.paths, section, values, key,
                              served_window=served,
                              larger_window=body.get("larger_window") is True))
    except BadRequest as exc:
        return error(400, str(exc))
    except settings_form.SaveRefused as exc:
        return JSONResponse({"ok": False, "error": "Not saved: nothing was written.",
                             "problems": exc.problems, "ask": exc.ask}, status_code=400)
    except ConfigError as exc:
        return JSONResponse({"ok": False, "error": "Not saved: nothing was written.",
                             "problems": {"": exc.problems}}, status_code=400)
    return JSONResponse({"ok": True, "text": saved.sentence(web.paths),
                         "changed": list(saved.changed)})


async def served_models(request: Request) -> Response:
    """The models the chosen server serves, for the model drop-down."""
    web = context_of(request)
    try:
        body = await json_body(request)
        provider = text_field(body, "provider")
        fields = [body.get(name, "") for name in ("base_url", "api_key_env", "key")]
        if not all(isinstance(v, str) for v in fields):
            raise BadRequest("base_url, api_key_env and key are text")
        # A bare address is asked, and given back, with the /v1 its API is under.
        address = settings_form.answers(provider, *fields).base_url or ""
        models = await settings_form.served_models(web.paths, provider, address, *fields[1:])
    except BadRequest as exc:
        return error(400, str(exc))
    except (ValueError, ConfigError, SetupFailed) as exc:
        return error(400, configuration.mask_secrets(str(exc)))
    except DiscoveryFailed as exc:
        return error(502, configuration.mask_secrets(str(exc)))
    return JSONResponse({"ok": True, "models": models, "base_url": address})


async def served_window(request: Request) -> Response:
    """The window the chosen server serves a model with, for the context window field."""
    web = context_of(request)
    try:
        body = await json_body(request)
        provider = text_field(body, "provider")
        fields = [body.get(name, "") for name in ("base_url", "api_key_env", "key", "model")]
        if not all(isinstance(v, str) for v in fields):
            raise BadRequest("base_url, api_key_env, key and model are text")
        window = await settings_form.served_window(web.paths, provider, *fields)
    except BadRequest as exc:
        return error(400, str(exc))
    except (ValueError, ConfigError, SetupFailed) as exc:
        return error(400, configuration.mask_secrets(str(exc)))
    except DiscoveryFailed as exc:
        return error(502, configuration.mask_secrets(str(exc)))
    return JSONResponse({"ok": True, "window": window})


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
