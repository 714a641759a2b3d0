"""What one (sample, epoch)'s requests did: every attempt, and the tokens the server reported.

The engine hands a Trace to the backend only when it wants one (the per-sample log is on, or
a token or time limit applies); without one the retry loop records nothing, so a run with the
log off pays nothing for it. An attempt is a small tuple, not an object, as there can be
millions: (wall-clock start, seconds it took, HTTP status or None, outcome). The outcome is
`ok`, the error class a failure shows (`http`, `timeout`, `connect`, `connection`,
`bad-reply`, ...), or the limit that cut it short. A backend with several replicas of a model
sets `replica` before an attempt: that attempt then has it as a fifth item (readers take it
when it is there). A chat reply's `reasoning_content` (a reasoning model's thinking, which
its server sends beside the answer) is kept here, for the log, never in the answer.
"""

from __future__ import annotations

import time
from typing import Protocol

Attempt = tuple[float, float, "int | None", str] | tuple[float, float, "int | None", str, str]
Timings = tuple["float | None", "float | None"]  # a streamed reply's (time to first token, inter-token latency)


class SampleBudget(Protocol):
    """A sample's token_limit as its requests see it (the engine's SampleTokens)."""

    async def admit(self, estimate: int) -> str | None:
        """Hold `estimate` tokens for a request about to go (waiting, while the sample's requests
        in flight hold what is left, for one of them to settle); or why none may go (the budget
        is spent)."""

    def settle(self, estimate: int, tokens: int) -> None:
        """A request admitted with `estimate` is over: its hold given back, the `tokens` its
        reply reported (0: none) spent."""


class Untraced:
    """What the retry loop records into when nobody asked for a trace: nothing."""

    __slots__ = ()

    async def start(self, estimate: int = 0) -> str | None:
        return None

    def end(self, status: int | None, outcome: str, usage: tuple[int, int] | None = None, stream: Timings | None = None) -> None:
        return None

    def think(self, text: str) -> None:
        """The answered reply's reasoning, as its server sent it beside the answer: kept by a Trace."""
        return None


NO_TRACE = Untraced()


class Trace(Untraced):
    __slots__ = ("attempts", "prompt_tokens", "completion_tokens", "budget", "replica", "ttft", "itl", "reasoning", "_at", "_t0", "_held")

    def __init__(self, budget: SampleBudget | None = None):
        self.attempts: list[Attempt] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.budget = budget
        self.replica: str | None = None  # the replica the next attempt goes to, when a backend has several
        self.ttft: float | None = None  # streamed: the answered attempt's time to first token
        self.itl: float | None = None  # and its mean time between tokens
        self.reasoning: str | None = None  # a server's `reasoning_content` beside the answer (the per-sample log keeps it)
        self._at = self._t0 = 0.0
        self._held: int | None = None  # the estimate the budget holds for the attempt in flight

    async def start(self, estimate: int = 0) -> str | None:
        """An attempt of about `estimate` tokens (its prompt's and the most it may generate) is
        about to be sent; why it may not be (the token budget is spent), or None."""
        if self.budget is not None:
            refusal = await self.budget.admit(estimate)
            if refusal is not None:
                return refusal
            self._held = estimate
        self._at, self._t0 = time.time(), time.monotonic()
        return None

    def end(self, status: int | None, outcome: str, usage: tuple[int, int] | None = None, stream: Timings | None = None) -> None:
        """The attempt started last is over; `usage`: the (prompt, completion) tokens its reply
        reports; `stream`: a streamed reply's timings."""
        at, took = round(self._at, 3), round(time.monotonic() - self._t0, 4)  # ms, 0.1 ms: what a reader needs
        self.attempts.append((at, took, status, outcome) if self.replica is None else (at, took, status, outcome, self.replica))
        self._t0 = 0.0
        if stream is not None:
            self.ttft, self.itl = stream
        if usage is not None:
            self.prompt_tokens += usage[0]
            self.completion_tokens += usage[1]
        if self.budget is not None and self._held is not None:
            self.budget.settle(self._held, 0 if usage is None else usage[0] + usage[1])
            self._held = None

    def think(self, text: str) -> None:
        self.reasoning = text

    def interrupted(self, outcome: str) -> None:
        """The attempt in flight, if any, was cut short (a time limit); say so in its record."""
        if self._t0:
            self.end(None, outcome)
