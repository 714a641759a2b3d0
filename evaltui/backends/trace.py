"""What one (sample, epoch)'s requests did: every attempt, and the tokens the server reported.

The engine hands a Trace to the backend only when it wants one (the per-sample log is on, or
a token or time limit applies); without one the retry loop records nothing, so a run with the
log off pays nothing for it. An attempt is a small tuple, not an object, as there can be
millions: (wall-clock start, seconds it took, HTTP status or None, outcome). The outcome is
`ok`, the error class a failure shows (`http`, `timeout`, `connect`, `connection`,
`bad-reply`, ...), or the limit that cut it short. A backend with several replicas of a model
sets `replica` before an attempt: that attempt then has it as a fifth item (readers take it
when it is there).
"""

from __future__ import annotations

import time
from typing import Protocol

Attempt = tuple[float, float, "int | None", str] | tuple[float, float, "int | None", str, str]


class SampleBudget(Protocol):
    """A sample's token_limit as its requests see it (the engine's SampleTokens)."""

    def refusal(self) -> str | None:
        """Why no request may go out now (the budget is spent), or None."""

    def spend(self, tokens: int) -> None: ...


class Untraced:
    """What the retry loop records into when nobody asked for a trace: nothing."""

    __slots__ = ()

    def start(self) -> str | None:
        return None

    def end(self, status: int | None, outcome: str, usage: tuple[int, int] | None = None) -> None:
        return None


NO_TRACE = Untraced()


class Trace(Untraced):
    __slots__ = ("attempts", "prompt_tokens", "completion_tokens", "budget", "replica", "_at", "_t0")

    def __init__(self, budget: SampleBudget | None = None):
        self.attempts: list[Attempt] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.budget = budget
        self.replica: str | None = None  # the replica the next attempt goes to, when a backend has several
        self._at = self._t0 = 0.0

    def start(self) -> str | None:
        """An attempt is about to be sent; why it may not be (the token budget is spent), or None."""
        refusal = self.budget.refusal() if self.budget is not None else None
        if refusal is None:
            self._at, self._t0 = time.time(), time.monotonic()
        return refusal

    def end(self, status: int | None, outcome: str, usage: tuple[int, int] | None = None) -> None:
        """The attempt started last is over; `usage`: the (prompt, completion) tokens its reply reports."""
        at, took = round(self._at, 3), round(time.monotonic() - self._t0, 4)  # ms, 0.1 ms: what a reader needs
        self.attempts.append((at, took, status, outcome) if self.replica is None else (at, took, status, outcome, self.replica))
        self._t0 = 0.0
        if usage is not None:
            self.prompt_tokens += usage[0]
            self.completion_tokens += usage[1]
            if self.budget is not None:
                self.budget.spend(usage[0] + usage[1])

    def interrupted(self, outcome: str) -> None:
        """The attempt in flight, if any, was cut short (a time limit); say so in its record."""
        if self._t0:
            self.end(None, outcome)
