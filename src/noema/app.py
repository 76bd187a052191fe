"""The composition root: the one place that wires the parts of an agent together.

Nothing else reaches across packages; interfaces receive an `App` built here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .config import Config, load_secrets
from .identity import Identity
from .memory.session import Session
from .memory.store import TurnStore
from .orchestrator.agent import Agent, AgentListener
from .orchestrator.cycle import CycleSettings, ReasoningCycle
from .orchestrator.prompt import build_system_prompt
from .paths import AgentPaths
from .providers.base import Provider
from .tools.builtin import identity_tools, time_tools
from .tools.registry import ToolRegistry


class NoModelConfigured(Exception):
    """No reasoning model is configured for this agent."""


@dataclass
class App:
    """A fully wired agent and the parts an interface may inspect."""

    paths: AgentPaths
    config: Config
    store: TurnStore
    session: Session
    identity: Identity
    provider: Provider
    tools: ToolRegistry
    agent: Agent

    def close(self) -> None:
        self.store.close()


def build_provider_from_config(config: Config, paths: AgentPaths,
                               environ: Mapping[str, str] | None = None) -> Provider:
    """The reasoning model's provider, or NoModelConfigured."""
    from .providers.catalog import build_provider

    if config.models.reasoning is None:
        raise NoModelConfigured(
            f"no reasoning model is configured for agent {paths.name!r}. Set one, e.g.\n"
            "  noema config set models.reasoning.provider openai\n"
            "  noema config set models.reasoning.model gpt-4o-mini\n"
            "and put OPENAI_API_KEY in the environment or in "
            f"{paths.secrets_file}. `noema demo` runs without a model."
        )
    return build_provider(config.models.reasoning, load_secrets(paths, environ))


def build_app(
    paths: AgentPaths,
    config: Config,
    *,
    provider: Provider | None = None,
    listener: AgentListener | None = None,
) -> App:
    """Open the agent's data and wire store, session, tools, model and shell."""
    paths.ensure()
    store = TurnStore(paths.turns_db, durable_to_power_loss=config.storage.durability == "power")
    session = Session.load(store)
    identity = Identity(paths.identity_dir)
    identity.ensure_defaults()
    provider = provider or build_provider_from_config(config, paths)

    tools = ToolRegistry([*time_tools(config.agent.timezone), *identity_tools(identity)])

    def system_prompt() -> str:
        return build_system_prompt(
            identity, agent_name=paths.name, language=config.agent.language
        )

    cycle = ReasoningCycle(
        session,
        provider,
        tools,
        system_prompt,
        CycleSettings(max_steps=config.cycle.max_steps),
    )
    agent = Agent(session, cycle, listener, context_window=provider.context_window)
    return App(paths, config, store, session, identity, provider, tools, agent)
