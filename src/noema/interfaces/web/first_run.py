"""The first-run form: `noema setup`'s steps (`setup_flow`) as fields of the
page, each failure told beside the field it concerns.

The form sends what it holds with every step (provider, address, key, model,
window); nothing is kept between steps and nothing is written before Save.
A key already kept (in `secrets.toml` or the environment) is sent only to its
provider's own address: an address typed here gets no key but the one typed
with it. A typed key is never sent back to the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ... import config as configuration
from ...paths import AgentPaths
from ...providers.base import AuthenticationFailed, ModelNotFound, ProviderError, \
    ProviderUnavailable
from ...providers.catalog import PROVIDERS
from ...providers.discovery import DiscoveryFailed, KeyRefused, Unreachable
from ...setup_flow import CHOICES, Answers, SetupFailed, fallback_window, key_name, live_test, \
    local, sendable, served_models, served_name, served_window, settings_of, with_api_path, write
from .settings import tested

FIELDS = ("provider", "base_url", "key", "model", "context_window")


class FieldProblem(ValueError):
    """What is wrong, and the field of the form it concerns ("" for the form as a whole)."""

    def __init__(self, field: str, text: str) -> None:
        super().__init__(configuration.mask_secrets(text))
        self.field = field


@dataclass(frozen=True, slots=True)
class Choice:
    """A provider as the form offers it."""

    name: str
    label: str
    base_url: str  # the catalogue's address, "" when the person must give one
    asks_address: bool  # a server the person runs, or one with no default address
    key_required: bool
    key_env: str  # where its key is kept
    key_kept: bool  # a key is kept there already

    def json(self) -> dict[str, Any]:
        return {"label": self.label, "base_url": self.base_url, "asks_address": self.asks_address,
                "key_required": self.key_required, "key_env": self.key_env,
                "key_kept": self.key_kept}


def choices(paths: AgentPaths) -> list[Choice]:
    """The providers `noema setup` offers, in its order."""
    try:
        kept = configuration.load_secrets(paths)
    except configuration.ConfigError:
        kept = {}
    found = []
    for name in CHOICES:
        spec = PROVIDERS[name]
        # Only a provider's own variable is read without being typed: a key kept
        # for a server the person runs belongs to whichever address it was set for.
        found.append(Choice(name, spec.label, spec.base_url or "",
                            local(spec) or spec.base_url is None, spec.key_required,
                            key_name(Answers(name)),
                            bool(spec.key_env and (kept.get(spec.key_env) or "").strip())))
    return found


@dataclass(frozen=True, slots=True)
class Filled:
    """The form as sent, checked: the answers, and the secrets the server may be sent."""

    answers: Answers
    secrets: Mapping[str, str]
    note: str | None = None  # what was changed in what the person typed (an added /v1)


def filled(paths: AgentPaths, body: Mapping[str, Any], *, model: bool = False) -> Filled:
    """The answers the form holds; FieldProblem for the first field that will not do."""
    values = {}
    for name in FIELDS:
        value = body.get(name, "")
        if not isinstance(value, str):
            raise FieldProblem(name, f"{name} must be text")
        values[name] = value.strip()
    provider = values["provider"]
    if provider not in CHOICES:
        raise FieldProblem("provider", "choose a provider from the list")
    spec = PROVIDERS[provider]
    answers = Answers(provider, model=values["model"])
    if local(spec) or spec.base_url is None:
        if not values["base_url"]:
            raise FieldProblem("base_url", "give the server's address, e.g. "
                               f"{spec.base_url or 'http://localhost:8000/v1'}")
        if not values["base_url"].startswith(("http://", "https://")):
            raise FieldProblem("base_url", "the address starts with http:// or https://")
        answers = replace(answers, base_url=values["base_url"])
    answers, note = with_api_path(answers)
    if values["key"]:
        answers = replace(answers, key=values["key"], api_key_env=key_name(answers))
    secrets = _secrets(paths, answers)
    env = answers.key_env
    if spec.key_required and not (secrets.get(env or "") or "").strip():
        raise FieldProblem("key", f"{spec.label} needs an API key")
    if model and not answers.model:
        raise FieldProblem("model", "list the server's models and choose one")
    if values["context_window"]:
        try:
            tokens = int(values["context_window"])
        except ValueError:
            raise FieldProblem("context_window", "the window is a whole number of tokens") \
                from None
        answers = replace(answers, context_window=tokens)
    return Filled(answers, secrets, note)


def _secrets(paths: AgentPaths, answers: Answers) -> dict[str, str]:
    """The secrets the server of these answers may see: a typed key, or a kept
    one when the address is its provider's own."""
    try:
        return sendable(configuration.load_secrets(paths), answers)
    except configuration.ConfigError as exc:
        raise FieldProblem("key", str(exc)) from None


def _discovery(exc: DiscoveryFailed, answers: Answers) -> FieldProblem:
    if isinstance(exc, KeyRefused):
        return FieldProblem("key", str(exc))
    if isinstance(exc, Unreachable):
        return FieldProblem("base_url" if answers.base_url else "provider", str(exc))
    return FieldProblem("", str(exc))


async def models(paths: AgentPaths, body: Mapping[str, Any]) -> dict[str, Any]:
    """The models the chosen server serves."""
    form = filled(paths, body)
    try:
        names = await served_models(form.answers, form.secrets)
    except SetupFailed as exc:
        raise FieldProblem("base_url", str(exc)) from None
    except DiscoveryFailed as exc:
        raise _discovery(exc, form.answers) from None
    return {"models": names, "base_url": form.answers.base_url or "", "note": form.note}


async def window(paths: AgentPaths, body: Mapping[str, Any]) -> dict[str, Any]:
    """The window the server serves the chosen model with, or the figure assumed."""
    form = filled(paths, body, model=True)
    assumed = fallback_window(form.answers.spec)
    try:
        found = await served_window(form.answers, form.secrets)
    except DiscoveryFailed as exc:
        return {"tokens": assumed, "source": f"assumed: the server's window could not be "
                f"read ({configuration.mask_secrets(str(exc))})", "note": None}
    if found is None:
        return {"tokens": assumed, "source": "assumed: the server does not say its window",
                "note": None}
    return {"tokens": found.tokens, "source": f"from {found.source}", "note": found.note}


async def test(paths: AgentPaths, body: Mapping[str, Any]) -> dict[str, Any]:
    """One real request to the chosen model, a tool offered; what it showed."""
    form = filled(paths, body, model=True)
    _valid(form.answers)
    try:
        outcome = await live_test(form.answers, form.secrets)
    except ProviderError as exc:
        raise _refusal(exc, form.answers) from None
    name = f"{form.answers.provider}/{form.answers.model}"
    text = tested(name, outcome)
    return {"text": text, "called_tool": outcome.called_tool}


def _refusal(exc: ProviderError, answers: Answers) -> FieldProblem:
    text = f"the test failed: {exc}"
    if isinstance(exc, AuthenticationFailed):
        return FieldProblem("key", text)
    if isinstance(exc, ModelNotFound):
        return FieldProblem("model", text)
    if isinstance(exc, ProviderUnavailable):
        return FieldProblem("base_url" if answers.base_url else "provider", text)
    return FieldProblem("", text)


def _valid(answers: Answers) -> None:
    try:
        settings_of(answers)
    except SetupFailed as exc:
        text = str(exc)
        field = next((f for f in FIELDS if text.startswith(f"{f}:")), "")
        raise FieldProblem(field, text) from None


async def save(paths: AgentPaths, body: Mapping[str, Any]) -> dict[str, Any]:
    """Everything at once, once the server confirms it serves the model: the
    key in `secrets.toml`, `[models.reasoning]` in `config.toml`."""
    form = filled(paths, body, model=True)
    answers = form.answers
    _valid(answers)
    try:
        served = await served_models(answers, form.secrets)
    except DiscoveryFailed as exc:
        problem = _discovery(exc, answers)
        raise FieldProblem(problem.field, f"{problem}; nothing was saved") from None
    listed = served_name(answers, served)
    if listed is None:
        raise FieldProblem("model", f"{answers.spec.label} at {answers.address} does not serve "
                           f"{answers.model!r}; it serves: {', '.join(served)}")
    answers = replace(answers, model=listed)
    try:
        write(paths, answers)
    except SetupFailed as exc:
        raise FieldProblem("", str(exc)) from None
    kept = (f" and the key in {paths.secrets_file} as {answers.key_env} (mode 600)"
            if answers.key and answers.key_env else "")
    return {"text": f"Saved: [models.reasoning] in {paths.config_file}{kept}.",
            "written": {k: v for k, v in answers.table().items() if v is not None}}


__all__ = ["Choice", "FieldProblem", "choices", "models", "save", "test", "window"]
