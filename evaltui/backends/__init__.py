"""Model backends: one module per wire protocol, the shared retry/rate policy in base.py."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from evaltui.backends.base import Backend, BackendError, secrets_of
from evaltui.backends.client import ModelClient, make_client
from evaltui.backends.lightllm import LightLLMBackend
from evaltui.backends.openai import LightLLMChatBackend, OpenAIChatBackend, OpenAICompletionsBackend
from evaltui.backends.pacing import Backoff, TokenBucket
from evaltui.backends.trace import Trace

if TYPE_CHECKING:
    from evaltui.plan import ModelConfig

BACKENDS: dict[str, type[Backend]] = {
    "lightllm": LightLLMBackend,
    "lightllm-chat": LightLLMChatBackend,
    "openai-chat": OpenAIChatBackend,
    "openai-completions": OpenAICompletionsBackend,
}


def backend_class(cfg: ModelConfig) -> type[Backend]:
    """The protocol of a model's `type`: what the plan, the engine and the commands ask about it
    (its url's form, its simulator path, whether it needs `model`, how it samples, ppl)."""
    return BACKENDS[cfg.type]


def api_key_of(cfg: ModelConfig) -> str | None:
    """The model's API key, from this process's environment (`api_key_env`): read here and only here."""
    return os.environ.get(cfg.api_key_env) if cfg.api_key_env else None


def make_backend(cfg: ModelConfig, client: ModelClient, **kwargs: Any) -> Backend:
    """The backend for `cfg.type` (`url=` or `urls=`: where the engine resolved the plan's urls
    to); the API key is read from the environment unless given (`api_key=`: a Ray actor is
    handed the driver's)."""
    kwargs.setdefault("api_key", api_key_of(cfg))
    return backend_class(cfg)(cfg, client, **kwargs)


__all__ = [
    "Trace", "Backend", "BackendError", "Backoff", "TokenBucket", "api_key_of", "backend_class", "make_backend",
    "make_client", "secrets_of", "BACKENDS",
]
