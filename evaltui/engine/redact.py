"""Keep API keys out of everything a run writes or prints.

A server, a proxy or an HTTP library may repeat a request back in an error message (OpenAI's
"Incorrect API key provided: …", a proxy's dump of the headers it got, a client library's
"invalid header value b'Bearer …'"), and failure messages go to checkpoints, results,
logs/failures.jsonl and the screen. So each one is cleaned of the model's key before it is kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from evaltui.plan import ModelConfig
from evaltui.redaction import REDACTED


def model_secrets(model: ModelConfig, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The forms in which the model's key, or a credential in its custom headers (`x-api-key`),
    could be echoed: as sent, trimmed, and escaped (repr)."""
    env = os.environ if env is None else env
    key = env.get(model.api_key_env) if model.api_key_env else None
    secrets = ([key] if key else []) + list(model.secret_header_values())
    forms = {form for s in secrets for form in (s, s.strip(), repr(s)[1:-1])}
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))  # longest first: no half-masked key


def redact(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text
