"""Deciding which request fails, and how.

Kept apart from the handlers so the decision order is written down once:
prompt too long (a real, non-retryable rejection), then `fail_first`, then
the random rates in the fixed order 429, 500, malformed, drop, slow, 400. The
random stream is drawn only for rates that are non-zero, so a given Faults
value and request sequence always produce the same faults.
"""

from __future__ import annotations

import random
from http import HTTPStatus

from evaltui.sim.config import Faults, SimConfig

PROMPT_TOO_LONG = "prompt_too_long"

_REASONS = {
    400: "bad request",
    401: "invalid API key",
    403: "forbidden",
    404: "model not found",
    408: "request timeout",
    413: "request entity too large",
    422: "prompt too long",
    429: "rate limit exceeded",
    500: "internal server error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
}


def simulated_message(status: int) -> str:
    reason = _REASONS.get(status)
    if reason is None:
        try:
            reason = HTTPStatus(status).phrase.lower()
        except ValueError:
            reason = "error"
    return f"simulated {status}: {reason}"


def format_seconds(value: float) -> str:
    """`1.0` -> "1", `0.05` -> "0.05": what a real Retry-After header looks like."""
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


class FaultInjector:
    def __init__(self, config: SimConfig) -> None:
        # Read config.faults on every call so a test may swap it on a running server.
        self._config = config
        self._faults: Faults | None = None
        self._rng = random.Random(0)

    def decide(self, prompt_chars: int, attempt: int) -> str | None:
        """The fault kind for this request, or None to answer normally.

        `attempt` is 1 for the first time this (model, prompt) is seen.
        """
        f = self._config.faults
        if f is not self._faults:
            self._faults = f
            self._rng = random.Random(f.seed)
        if f.max_prompt_chars and prompt_chars > f.max_prompt_chars:
            return PROMPT_TOO_LONG
        if attempt <= f.fail_first:
            return f.fail_first_kind
        rng = self._rng
        if f.rate_429 and rng.random() < f.rate_429:
            return "429"
        if f.rate_500 and rng.random() < f.rate_500:
            return "500"
        if f.rate_malformed and rng.random() < f.rate_malformed:
            return "malformed"
        if f.rate_drop and rng.random() < f.rate_drop:
            return "drop"
        if f.rate_slow and rng.random() < f.rate_slow:
            return "slow"
        if f.rate_400 and rng.random() < f.rate_400:
            return "400"
        return None
