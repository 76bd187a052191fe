"""Settings of narrative memory: when to compact, how much, how strictly.

They live under `[memory]` in an agent's config.toml. The chronicler's own
model is chosen under `[models.chronicler]`; these settings say how it is used.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class MemorySettings(BaseModel):
    """When and how the session is compacted into save points, and pruned."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    trigger_fraction: float = Field(
        0.6, gt=0, le=0.95,
        description="compact when the turns pass this share of the room the reasoning model's "
        "window leaves them (after the system prompt, tool descriptions and answer reserve)",
    )
    trigger_turns: int = Field(
        400, ge=8, description="compact when the session holds this many turns, whatever their size",
    )
    keep_recent_turns: int = Field(
        12, ge=2, description="the most recent turns always stay raw in the session",
    )
    block_fraction: float = Field(
        0.5, gt=0, le=1, description="share of the session's tokens one compaction takes",
    )
    min_block_turns: int = Field(4, ge=1, description="fewer turns than this are not worth a save point")
    max_block_turns: int = Field(240, ge=2, description="most turns one save point narrates")
    chronicler_input_fraction: float = Field(
        0.5, gt=0, le=0.9,
        description="share of the chronicler's window its input may fill (the rest is for the answer)",
    )
    retries: int = Field(2, ge=0, le=10, description="new attempts after a rejected save point")
    chronicler_attempt_s: float = Field(
        120, ge=1, le=3600,
        description="the longest one chronicler attempt may take: the block it reads and the "
        "answer it writes are sized to it from the speed measured at the chronicler's server",
    )
    retry_after_turns: int = Field(
        24, ge=1, description="after a compaction fails, wait for this many new turns before trying again",
    )
    language: Literal["en", "es"] | None = Field(
        None, description="language of the save points; the agent's language when unset",
    )
    min_journey_words: int = Field(40, ge=0, description="a shorter Journey is rejected as terse")
    min_coverage: float = Field(
        0.0, ge=0, le=1,
        description="reject a save point citing a smaller share of the block's user and assistant turns",
    )
    render_result_chars: int = Field(
        1500, ge=200, description="tool results are cut to this length for the chronicler",
    )
    prune_after_turns: int = Field(
        8, ge=1, description="tool results older than this many turns may be pruned",
    )
    prune_min_tokens: int = Field(
        600, ge=50, description="only tool results at least this large are pruned",
    )
    pinned_observations: int = Field(
        20, ge=0, description="how many pinned observations the system prompt shows (newest first)",
    )
    embeddings: Literal["local", "provider", "off"] = Field(
        "local",
        description="the meaning signal of history search: the embedded local model, the "
        "reasoning provider's /v1/embeddings endpoint (set embedding_model), or off",
    )
    embedding_model: str | None = Field(
        None, description="the provider's embedding model when embeddings = \"provider\" "
        "(e.g. text-embedding-3-small, nomic-embed-text)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> MemorySettings:
        if self.min_block_turns > self.max_block_turns:
            raise ValueError("min_block_turns cannot exceed max_block_turns")
        if self.keep_recent_turns >= self.trigger_turns:
            raise ValueError("keep_recent_turns must be smaller than trigger_turns")
        if self.embeddings == "provider" and not (self.embedding_model or "").strip():
            raise ValueError(
                'embeddings = "provider" needs memory.embedding_model, the name of the '
                'provider\'s embedding model (or set embeddings = "local")'
            )
        return self

    def language_or(self, agent_language: str) -> str:
        """The save points' language, falling back to the agent's."""
        return self.language or agent_language
