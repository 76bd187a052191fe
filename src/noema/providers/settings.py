"""The settings of one model choice (reasoning or chronicler), validated.

Every error says what to change. Input values are hidden from pydantic's
error text because a key pasted into the wrong field must not be echoed
into a terminal or a log.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .catalog import DEFAULT_CONTEXT_WINDOW, PROVIDERS, ProviderKind, ProviderSpec

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ModelSettings(BaseModel):
    """Which model to use, where, and how patiently."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    provider: str = Field(description="A key of the provider table, e.g. 'openai' or 'ollama'.")
    model: str = Field(description="The model name as the provider knows it.")
    base_url: str | None = Field(None, description="Overrides the provider's default address.")
    api_key_env: str | None = Field(
        None, description="Name of the variable holding the key (not the key itself)."
    )
    context_window: int | None = Field(None, gt=0, description="Tokens the model can attend to.")
    max_output_tokens: int = Field(4096, gt=0)
    temperature: float | None = Field(None, ge=0, le=2)
    timeout_s: float = Field(120, gt=0, description="Longest wait for the next bytes.")
    connect_timeout_s: float = Field(10, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    script: Path | None = Field(None, description="Scripted provider only: the script to replay.")
    token_delay_s: float = Field(0.0, ge=0, description="Scripted provider only.")

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in PROVIDERS:
            raise ValueError(
                f"unknown provider {value!r}; known providers: {', '.join(PROVIDERS)}"
            )
        return value

    @field_validator("model")
    @classmethod
    def _model_named(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("model must name the model to use, e.g. 'gpt-4o-mini' or 'llama3.1:8b'")
        return value

    @field_validator("base_url")
    @classmethod
    def _usable_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "base_url must be an http:// or https:// address, "
                "e.g. 'http://localhost:11434/v1'"
            )
        return value

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            # The value is not repeated: it may well be the key itself.
            raise ValueError(
                "api_key_env must be the NAME of the variable that holds the key "
                "(letters, digits and '_', e.g. OPENAI_API_KEY), not the key itself"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ModelSettings:
        spec = self.spec
        if spec.kind is ProviderKind.SCRIPTED:
            if self.script is None:
                raise ValueError("provider 'scripted' needs script: the path of the script to replay")
            return self
        if self.script is not None or self.token_delay_s:
            raise ValueError(
                f"script and token_delay_s apply only to provider 'scripted', not {self.provider!r}"
            )
        if self.resolved_base_url is None:
            raise ValueError(
                f"provider {self.provider!r} has no default address; set base_url, "
                "e.g. 'http://localhost:8000/v1'"
            )
        return self

    @property
    def spec(self) -> ProviderSpec:
        return PROVIDERS[self.provider]

    @property
    def resolved_base_url(self) -> str | None:
        return self.base_url or self.spec.base_url

    @property
    def resolved_key_env(self) -> str | None:
        return self.api_key_env or self.spec.key_env

    @property
    def resolved_context_window(self) -> int:
        return self.context_window or self.spec.context_window or DEFAULT_CONTEXT_WINDOW
