"""The orchestrator: the reasoning cycle, the history it keeps valid, and the
reflexes that decide when the world may interrupt a thought.

`core.Reflexes` is the sans-IO state machine (inputs in, decisions out);
`agent.Agent` is the asyncio shell that feeds it and performs its decisions.
"""

from .agent import Agent, AgentListener, AgentStatus, Senses
from .core import OrchestratorBug, Phase, Reflexes, ReflexStatus
from .cycle import CycleListener, CycleProgress, CycleSettings, ReasoningCycle
from .settings import ReflexSettings, UrgencyRuleSettings
from .urgency import UrgencyRules, Verdict

__all__ = [
    "Agent", "AgentListener", "AgentStatus", "CycleListener", "CycleProgress", "CycleSettings",
    "OrchestratorBug", "Phase", "ReasoningCycle", "ReflexSettings", "ReflexStatus", "Reflexes",
    "Senses", "UrgencyRuleSettings", "UrgencyRules", "Verdict",
]
