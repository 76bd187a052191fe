"""Fake local model servers: the Chat Completions fake, plus what each kind of
server says about itself (its models, the window it serves them with), on
the routes and in the shapes the real servers use.

    with FakeLocalServer("ollama", {"llama3.1:8b": 131072}, num_ctx={"llama3.1:8b": 8192}):
        ...
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from ._server import _send_json
from .openai_server import FakeOpenAIServer
from .script import RecordedRequest

Kind = Literal["ollama", "llamacpp", "vllm", "openai"]


class FakeLocalServer(FakeOpenAIServer):
    """A model server of one kind on 127.0.0.1.

    `models` maps each served model to its window: for Ollama the model's own
    length (`model_info`), for llama.cpp the served `n_ctx` (`/props`), for
    vLLM `max_model_len`; None leaves the figure out of the answer.
    `num_ctx` (Ollama) is a model's num_ctx parameter; `loaded` (Ollama) the
    window of a model loaded now (`/api/ps`). `props_flat` answers llama.cpp's
    `/props` with a top-level `n_ctx`, as some versions do. `key` makes every
    route ask for `Authorization: Bearer <key>`.
    """

    def __init__(self, kind: Kind, models: dict[str, int | None], *,
                 num_ctx: dict[str, int] | None = None, loaded: dict[str, int] | None = None,
                 props_flat: bool = False, key: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind = kind
        self.models = dict(models)
        self.num_ctx = dict(num_ctx or {})
        self.loaded = dict(loaded or {})
        self.props_flat = props_flat
        self.key = key

    def _routes(self) -> dict[tuple[str, str], Any]:
        routes: dict[tuple[str, str], Any] = {("GET", "/v1/models"): self._openai_models}
        if self.kind == "ollama":
            routes |= {("GET", "/api/tags"): self._tags, ("GET", "/api/ps"): self._ps,
                       ("POST", "/api/show"): self._show}
        if self.kind == "llamacpp":
            routes[("GET", "/props")] = self._props
        return routes

    async def _app(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.key is not None and headers.get("authorization") != f"Bearer {self.key}":
            await _send_json(send, 401, {"error": {"message": "invalid api key"}})
            return
        handler = self._routes().get((scope["method"], scope["path"]))
        if handler is None:
            await super()._app(scope, receive, send)
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        body = json.loads(raw) if raw else None
        with self._lock:
            self._requests.append(RecordedRequest(scope["method"], scope["path"], headers, body))
            self._arrived.notify_all()
        status, payload = handler(body)
        await _send_json(send, status, payload)

    # -- the routes, as each server answers them ----------------------------------

    def _openai_models(self, _body: Any) -> tuple[int, Any]:
        data = []
        for name, window in self.models.items():
            entry: dict[str, Any] = {"id": name, "object": "model", "created": int(time.time()),
                                     "owned_by": {"ollama": "library", "llamacpp": "llamacpp",
                                                  "vllm": "vllm"}.get(self.kind, "system")}
            if self.kind == "vllm":
                entry |= {"root": name, "parent": None, "permission": []}
                if window is not None:
                    entry["max_model_len"] = window
            if self.kind == "llamacpp":  # the training length, not what is served
                entry["meta"] = {"vocab_type": 2, "n_vocab": 49152, "n_ctx_train": 8192}
            data.append(entry)
        return 200, {"object": "list", "data": data}

    def _tags(self, _body: Any) -> tuple[int, Any]:
        return 200, {"models": [
            {"name": name, "model": name, "modified_at": "2026-11-30T10:00:00Z", "size": 4_920_000_000,
             "digest": f"{abs(hash(name)):064x}"[:64],
             "details": {"format": "gguf", "family": "llama", "parameter_size": "8.0B",
                         "quantization_level": "Q4_K_M"}}
            for name in self.models]}

    def _ps(self, _body: Any) -> tuple[int, Any]:
        return 200, {"models": [{"name": name, "model": name, "size": 6_000_000_000,
                                 "context_length": window}
                                for name, window in self.loaded.items()]}

    def _show(self, body: Any) -> tuple[int, Any]:
        name = (body or {}).get("model") or (body or {}).get("name")
        if name not in self.models:
            return 404, {"error": f"model '{name}' not found"}
        parameters = 'stop                           "<|eot_id|>"'
        if name in self.num_ctx:
            parameters += f"\nnum_ctx                        {self.num_ctx[name]}"
        info: dict[str, Any] = {"general.architecture": "llama", "general.parameter_count": 8_030_261_248}
        if self.models[name] is not None:
            info["llama.context_length"] = self.models[name]
        return 200, {"modelfile": f"FROM {name}\n", "parameters": parameters,
                     "template": "{{ .Prompt }}", "details": {"format": "gguf", "family": "llama"},
                     "model_info": info}

    def _props(self, _body: Any) -> tuple[int, Any]:
        n_ctx = next(iter(self.models.values()), None)
        settings = {"temperature": 0.8, "top_k": 40}
        if self.props_flat:
            return 200, {"n_ctx": n_ctx, "total_slots": 1, "default_generation_settings": settings}
        return 200, {"default_generation_settings": {**settings, "n_ctx": n_ctx},
                     "total_slots": 1, "chat_template": "{{ messages }}"}
