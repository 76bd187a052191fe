"""`noema setup`: the first run, from nothing to a model that answers, asked
in a terminal. The steps themselves are `setup_flow`'s, which the web page's
first-run form takes too: the provider, a local server's address, the key
(to `secrets.toml`, mode 600), a model from the server's own list, the
window the server reports, one live request offering a tool, and only then
the files, each at once.

The same steps run without questions when `--provider` is given: every
answer then comes from an option, and what the server says still decides
the model list and the window.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import click

from ... import config as configuration
from ...paths import AgentPaths
from ...providers.base import ProviderError
from ...providers.catalog import PROVIDERS
from ...providers.discovery import DiscoveryFailed, Window
from ...setup_flow import CHOICES, Answers, Outcome, SetupFailed, fallback_window, key_name, \
    live_test, local, secrets_with, served_models, served_name, served_window, settings_of, \
    unsaid_window, window_to_write, write
from ...setup_flow import with_api_path as _with_api_path

Say = Callable[[str], None]


def _window_line(window: Window) -> str:
    line = f"context window: {window.tokens:,} tokens (from {window.source})"
    return line + (f"\n  note: {window.note}" if window.note else "")


def _outcome_lines(answers: Answers, outcome: Outcome) -> list[str]:
    name = f"{answers.provider}/{answers.model}"
    if outcome.called_tool:
        return [f"test: {name} answered and called a tool: it is ready."]
    said = f' ("{outcome.answered}")' if outcome.answered else ""
    return [f"test: {name} answered{said} but did not call the tool it was offered.",
            "  warning: the agent's files, commands and memory are tools; a model that does not "
            "call them can only talk. A larger model, or a server started with tool calling "
            "on, does better."]


# -- without questions -----------------------------------------------------------


def with_api_path(answers: Answers, say: Say) -> Answers:
    """A server's bare address with the `/v1` its catalogue address has, said."""
    answers, note = _with_api_path(answers)
    if note:
        say(note)
    return answers


def run_options(paths: AgentPaths, answers: Answers, *, test: bool, say: Say) -> None:
    """`noema setup --provider …`: every answer from the options."""
    answers = with_api_path(answers, say)
    secrets = secrets_with(paths, answers)
    _key_present(answers, secrets)
    try:
        served = asyncio.run(served_models(answers, secrets))
    except DiscoveryFailed as exc:
        served = None
        if test:
            raise SetupFailed(f"{exc}\nNothing was written (with --no-test the setup is "
                              "written without asking the server).") from None
        say(f"warning: {exc}; the model name is taken as given")
    if served is not None:
        if not answers.model:
            if len(served) != 1:
                raise SetupFailed(f"name the model with --model; {answers.spec.label} serves: "
                                  + ", ".join(served))
            answers = replace(answers, model=served[0])
        elif served_name(answers, served) is None:
            raise SetupFailed(f"{answers.spec.label} at {answers.address} does not serve "
                              f"{answers.model!r}; it serves: {', '.join(served)}")
    if not answers.model:
        raise SetupFailed("name the model with --model")
    say(f"model: {answers.model}")
    if answers.context_window is None and served is not None:
        listed = replace(answers, model=served_name(answers, served) or answers.model)
        answers = replace(answers, context_window=_read_window(listed, secrets, say))
    elif answers.context_window is not None:
        say(f"context window: {answers.context_window:,} tokens (as given)")
    else:  # the server was not asked
        say(f"context window: {unsaid_window(answers.spec)} (--context-window sets it)")
        answers = replace(answers, context_window=window_to_write(answers.spec))
    settings_of(answers)
    if test:
        try:
            outcome = asyncio.run(live_test(answers, secrets))
        except ProviderError as exc:
            raise SetupFailed(f"the test request failed: {configuration.mask_secrets(str(exc))}"
                              "\nNothing was written.") from None
        for line in _outcome_lines(answers, outcome):
            say(line)
    write(paths, answers)
    say(f"written: [models.reasoning] in {paths.config_file}")


def _reading_window(answers: Answers, say: Say) -> None:
    if answers.provider == "llamacpp":  # its Python server takes a few seconds to say it
        say("reading the window the server runs…")


def _read_window(answers: Answers, secrets: Mapping[str, str], say: Say) -> int | None:
    _reading_window(answers, say)
    try:
        window = asyncio.run(served_window(answers, secrets))
    except DiscoveryFailed as exc:
        window = None
        say(f"warning: the window could not be read: {exc}")
    if window is None:
        say(f"context window: {unsaid_window(answers.spec)} (--context-window sets it)")
        return window_to_write(answers.spec)
    say(_window_line(window))
    return window.tokens


def _key_present(answers: Answers, secrets: Mapping[str, str]) -> None:
    env = answers.key_env
    if env and not (secrets.get(env) or "").strip() and (answers.spec.key_required
                                                         or answers.api_key_env):
        raise SetupFailed(f"{answers.spec.label} needs an API key, but {env} is not set: "
                          f"export {env}=... first, or run `noema setup` without options to "
                          "type it (it is kept in secrets.toml, mode 600)")


# -- with questions -------------------------------------------------------------


def run_questions(paths: AgentPaths, *, say: Say, ask: Callable[..., Any],
                  confirm: Callable[..., bool]) -> bool:
    """The interactive first run; False when the person chose not to write."""
    say(f"Setting up a model for agent {paths.name!r} (Ctrl-C leaves; nothing is written "
        "until the end).\n")
    for number, name in enumerate(CHOICES, 1):
        spec = PROVIDERS[name]
        where = "on your machine" if local(spec) and spec.base_url else (
            "any address" if spec.base_url is None else "hosted, needs a key")
        say(f"  {number}. {spec.label} ({name}, {where})")
    provider = ask("Provider (number or name)", default="1", value_proc=_provider_choice)
    answers = Answers(provider)
    spec = answers.spec
    if local(spec):
        url = ask("Server address", default=spec.base_url or "http://localhost:8000/v1")
        answers = with_api_path(replace(answers, base_url=url.strip()), say)
    answers = _ask_key(paths, answers, say=say, ask=ask)
    answers, served = _ask_served(paths, answers, say=say, ask=ask)
    secrets = secrets_with(paths, answers)
    if served:
        say(f"\n{spec.label} serves:")
        for number, name in enumerate(served, 1):
            say(f"  {number}. {name}")
        model = ask("Model (number or name)", default="1",
                    value_proc=lambda text: _listed(text, served))
    else:
        model = ask("Model name", value_proc=_non_empty)
    answers = replace(answers, model=model)
    answers = _ask_window(answers, secrets, asked_server=bool(served), say=say, ask=ask)
    try:
        settings_of(answers)
    except SetupFailed as exc:
        say(f"error: {exc}")
        return False
    say("\nTrying a request (with a tool offered)…")
    try:
        for line in _outcome_lines(answers, asyncio.run(live_test(answers, secrets))):
            say(line)
    except ProviderError as exc:
        say(f"test: it failed: {configuration.mask_secrets(str(exc))}")
        if not confirm("Write this setup anyway?", default=False):
            say("Nothing was written.")
            return False
    say("")
    say(f"[models.reasoning] in {paths.config_file}:")
    for name, value in answers.table().items():
        if value is not None:
            say(f"  {name} = {json.dumps(value)}")
    if answers.key and answers.key_env:
        say(f"and {answers.key_env} in {paths.secrets_file} (mode 600)")
    if not confirm("Write it?", default=True):
        say("Nothing was written.")
        return False
    write(paths, answers)
    say("Written. `noema chat` talks with it; `noema config check` checks it again.")
    return True


def _ask_window(answers: Answers, secrets: Mapping[str, str], *, asked_server: bool, say: Say,
                ask: Callable[..., Any]) -> Answers:
    """The window, offering what the server says (or the catalogue's figure)."""
    window: Window | None = None
    if asked_server:
        _reading_window(answers, say)
        try:
            window = asyncio.run(served_window(answers, secrets))
        except DiscoveryFailed as exc:
            say(f"warning: the window could not be read: {exc}")
    if window is not None:
        say(_window_line(window))
    else:
        say(f"context window (the tokens the model reads at once): "
            f"{unsaid_window(answers.spec)}.")
    tokens = ask("Context window in tokens", type=click.IntRange(min=256),
                 default=window.tokens if window else fallback_window(answers.spec))
    return replace(answers, context_window=tokens)


def _ask_served(paths: AgentPaths, answers: Answers, *, say: Say,
                ask: Callable[..., Any]) -> tuple[Answers, list[str]]:
    """The models the server serves. When a local server's list cannot be
    read, its address is asked again, until it answers or the person keeps
    the address and goes on without the list."""
    while True:
        try:
            return answers, asyncio.run(served_models(answers, secrets_with(paths, answers)))
        except (DiscoveryFailed, SetupFailed) as exc:
            say(f"warning: {exc}")
        if not local(answers.spec):
            return answers, []
        url = ask("Server address (another, or Enter to go on without its list)",
                  default=answers.address).strip()
        if url == answers.address:
            return answers, []
        answers = with_api_path(replace(answers, base_url=url), say)


def _ask_key(paths: AgentPaths, answers: Answers, *, say: Say,
             ask: Callable[..., Any]) -> Answers:
    spec = answers.spec
    env = spec.key_env
    secrets = configuration.load_secrets(paths)
    if env and (secrets.get(env) or "").strip():
        where = "secrets.toml" if env in configuration.read_secrets_file(paths.secrets_file) \
            else "the environment"
        say(f"The key in {env} (from {where}) is used.")
        return answers
    if spec.key_required:
        key = ask(f"{spec.label} API key (kept in secrets.toml, mode 600)", hide_input=True,
                  value_proc=_non_empty)
        return replace(answers, key=key.strip())
    key = ask("API key, if the server asks for one (Enter: none)", default="", hide_input=True,
              show_default=False)
    if not key.strip():
        return answers
    return replace(answers, key=key.strip(), api_key_env=key_name(answers))


def _provider_choice(text: str) -> str:
    text = text.strip()
    if text.isdigit() and 1 <= int(text) <= len(CHOICES):
        return CHOICES[int(text) - 1]
    if text in CHOICES:
        return text
    raise click.BadParameter(f"{text!r} is not one of 1–{len(CHOICES)} or "
                             f"{', '.join(CHOICES)}")


def _listed(text: str, names: list[str]) -> str:
    text = text.strip()
    if text.isdigit() and 1 <= int(text) <= len(names):
        return names[int(text) - 1]
    if text in names:
        return text
    raise click.BadParameter(f"{text!r} is not on the list; give its number or its name")


def _non_empty(text: str) -> str:
    if not text.strip():
        raise click.BadParameter("it cannot be empty")
    return text.strip()


__all__ = ["Answers", "CHOICES", "Outcome", "SetupFailed", "live_test", "run_options",
           "run_questions", "write"]
