"""Adaptive concurrency: how many requests one replica is sent at once, found as TCP finds its window.

A server says it is full in three ways: it refuses (429, 503), it stops answering in time
(a timeout), or it answers later than it did with less to do (its queue grows). The first two
are "drops", the third the latency gradient of TCP Vegas and Netflix's concurrency-limits: the
smoothed latency against its own running minimum, the latency the server shows when it is not
queueing. The limit follows AIMD between `lo` and `hi`:

- slow start: +1 per answer (the limit doubles every round trip) until the first drop;
- then +1 per round trip (+1/limit per answer), but only while the limit is what holds the
  requests back (at least half of it in use), so an idle model does not inflate it;
- a drop, or latency above TOLERANCE × its minimum, multiplies it by BACKOFF — once per round
  trip: a request sent before the last decrease cannot cause another, or one burst of 429s
  would take the limit straight to `lo`.

Measured against a server that refuses above 16 in flight (bench/fleet.py), the limit settles
between 13 and 17 and one request in ~50 is refused. Retry-After is not this class's business:
the backend's TokenBucket holds every request of the model as before.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

BACKOFF = 0.8  # the multiplicative decrease (TCP Reno halves; Netflix's AIMD keeps 0.9)
TOLERANCE = 2.0  # smoothed latency above this × its running minimum: the server is queueing
SMOOTHING = 0.1  # weight of a new latency in the smoothed one (about the last ten answers)
MIN_WINDOW = 256  # answers over which the running minimum is taken: a slower dataset is learnt


class AdaptiveLimit:
    """The limit of one replica; `limit` is the number of requests it may have in flight now.

    The clock is injected so tests can replay a schedule of answers without waiting for it."""

    __slots__ = ("lo", "hi", "value", "_threshold", "_decreased_at", "_latency", "_floor", "_older_floor", "_seen", "_clock")

    def __init__(self, lo: int, hi: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.lo, self.hi = lo, hi
        self.value = float(lo)
        self._threshold = float(hi)  # slow start below it; it becomes the limit after a decrease
        self._decreased_at = -math.inf
        self._latency = 0.0  # smoothed; 0 before the first answer
        self._floor = self._older_floor = math.inf  # the minimum of this window and of the one before
        self._seen = 0
        self._clock = clock

    @property
    def limit(self) -> int:
        return int(self.value)

    def on_answer(self, sent_at: float, latency: float, in_flight: int) -> None:
        """A 2xx `latency` seconds after `sent_at`, with `in_flight` requests out (this one included)."""
        smoothed = latency if self._latency == 0.0 else self._latency + SMOOTHING * (latency - self._latency)
        self._latency = smoothed
        if smoothed < self._floor:
            self._floor = smoothed
        self._seen += 1
        if self._seen >= MIN_WINDOW:
            self._seen, self._older_floor, self._floor = 0, self._floor, smoothed
        if smoothed > TOLERANCE * min(self._floor, self._older_floor):
            self.on_drop(sent_at)
        elif 2 * in_flight >= self.value:
            self.value = min(self.hi, self.value + (1.0 if self.value < self._threshold else 1.0 / self.value))

    def on_drop(self, sent_at: float) -> None:
        """A 429, 503 or timeout of a request sent at `sent_at`."""
        if sent_at < self._decreased_at:
            return  # sent before the last decrease, which it is part of
        self.value = max(float(self.lo), self.value * BACKOFF)
        self._threshold = self.value
        self._decreased_at = self._clock()
