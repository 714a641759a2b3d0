"""The secrets of one model a run must keep out of everything it writes or prints (masked by
`evaltui.redaction.redact`: whole or any 8 characters of them, in any form they are echoed in)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from evaltui.plan import ModelConfig
from evaltui.redaction import redact

__all__ = ["model_secrets", "redact"]


def model_secrets(model: ModelConfig, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The model's key and the credentials in its custom headers (`x-api-key`), as sent."""
    env = os.environ if env is None else env
    key = env.get(model.api_key_env) if model.api_key_env else None
    return tuple(s for s in ([key] if key else []) + list(model.secret_header_values()) if s)
