"""What the simulator saw, so tests elsewhere can assert on the client's behaviour.

Only requests to the three model endpoints (/generate, /v1/chat/completions,
/v1/completions) are counted: health checks and stats polling by a test or
the runner must not disturb the numbers being asserted.

Times are `time.monotonic()`, comparable with the test's own clock (and, on
Linux, across processes).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import Any, NamedTuple

LOG_SIZE = 100_000


class LogRecord(NamedTuple):
    t_received: float
    t_done: float
    model: str
    endpoint: str
    prompt: str
    #: The generation parameters exactly as the client sent them
    #: (LightLLM "parameters", or the OpenAI body minus model/messages/prompt).
    params: dict[str, Any]
    #: The reply's HTTP status (0: the connection was dropped instead).
    status: int = 200
    #: The request's parsed body, when the server records them (SimConfig.record_bodies).
    body: dict[str, Any] | None = None


class SimStats:
    def __init__(self, log_size: int = LOG_SIZE) -> None:
        self._log_size = log_size
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        """Forget history; `in_flight` is a live gauge and survives."""
        self.requests_total = 0
        self.tokens = 0  # prompt + generated tokens of the replies sent, as their usage says
        self.max_in_flight = self.in_flight
        self.attempts: Counter[tuple[str, str]] = Counter()
        self.faults: Counter[str] = Counter()
        self.endpoints: Counter[str] = Counter()
        self.log: deque[LogRecord] = deque(maxlen=self._log_size)
        #: The request window: first model request received to last reply finished. Kept apart
        #: from the bounded log so a benchmark of any size can read it without fetching the log.
        self.first_received: float | None = None
        self.last_done: float | None = None

    def begin(self, endpoint: str) -> float:
        self.requests_total += 1
        self.endpoints[endpoint] += 1
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        now = time.monotonic()
        if self.first_received is None:
            self.first_received = now
        return now

    def end(self, t_received: float, model: str, endpoint: str, prompt: str,
            params: dict[str, Any], status: int = 200, tokens: int = 0, body: dict[str, Any] | None = None) -> None:
        self.in_flight -= 1
        self.tokens += tokens
        self.last_done = now = time.monotonic()
        self.log.append(LogRecord(t_received, now, model, endpoint, prompt, params, status, body))

    def snapshot(self) -> SimStats:
        """An independent copy, safe to read while the server keeps counting."""
        snap = SimStats.__new__(SimStats)
        snap._log_size = self._log_size
        snap.requests_total = self.requests_total
        snap.tokens = self.tokens
        snap.in_flight = self.in_flight
        snap.max_in_flight = self.max_in_flight
        snap.attempts = Counter(self.attempts)
        snap.faults = Counter(self.faults)
        snap.endpoints = Counter(self.endpoints)
        snap.first_received, snap.last_done = self.first_received, self.last_done
        # Records are tuples and the server never mutates a logged params dict.
        snap.log = deque(self.log, maxlen=self._log_size)
        return snap

    def to_json(self, log_tail: int | None = None) -> dict[str, Any]:
        """The /sim/stats body; `log_tail` keeps only that many most recent records."""
        if log_tail is None:
            log = list(self.log)
        else:
            log = list(self.log)[-log_tail:] if log_tail > 0 else []
        return {
            "requests_total": self.requests_total,
            "tokens": self.tokens,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "attempts": [
                {"model": model, "prompt": prompt, "count": count}
                for (model, prompt), count in self.attempts.items()
            ],
            "faults": dict(self.faults),
            "endpoints": dict(self.endpoints),
            "first_received": self.first_received,
            "last_done": self.last_done,
            "log": [r._asdict() for r in log],
        }

    def __repr__(self) -> str:
        return (f"SimStats(requests_total={self.requests_total}, in_flight={self.in_flight}, "
                f"max_in_flight={self.max_in_flight}, faults={dict(self.faults)})")
