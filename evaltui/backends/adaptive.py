"""Adaptive concurrency: how many requests one replica is sent at once, found as TCP finds its window.

A server says it is full in three ways: it refuses (429, 503), it stops answering in time
(a timeout), or it answers later than it did with less to do (its queue grows). The first two
are "drops", the third the latency gradient of TCP Vegas and Netflix's concurrency-limits: the
latency of the last round trip against the lowest seen. The limit follows AIMD between `lo`
and `hi`:

- slow start: +1 per answer (the limit doubles every round trip) until the first decrease;
- then +1 per round trip (+1/limit per answer), but only while the limit is what holds the
  requests back (at least half of it in use), so an idle model does not inflate it;
- a drop, or latency above TOLERANCE × the lowest, multiplies it by BACKOFF — once per round
  trip: a request sent before the last decrease cannot cause another (nor, for latency, one
  judged before a round trip of answers since), or one burst of 429s would take the limit
  straight to `lo`.

Latency also rises when the work does (a dataset of long answers after one of short ones), and
reading that as a queue cut the limit every round trip down to `lo` against a server that never
queued (64 → 1; the run took 14× as long as at a fixed 64). What tells the two apart is Little's
law: latency = requests in flight / throughput, and a server does not get slower overall for
being given more to do, so its latency can be at most (our requests in flight) / (the most
throughput it has shown). A latency above that, with EXPLAINED as slack for noise, is not our
queue: the work changed (or someone else loads the server). Then the lowest latency and the
throughput are learnt anew from now on, and the cuts made on the stale ones since latency was
last low are undone. That also answers "did the cut lower latency?": each cut lowers the
requests in flight, and so the bound, and latency that stays put soon exceeds it.

Latency and load are averaged over about a round trip of answers (each answer weighs
1/max(ROUND, limit)) and paired — each latency with the requests that were in flight when it
was sent — so a mix of short and long prompts is neither a queue nor a change of work.
Replayed on an injected clock (tests/test_adaptive.py): 600 answers of 50 ms then 600 of 1 s
take 1.02× a fixed 64's time (the old rule: 15×); a 50/50 mix of 50 ms and 1 s, 1.1×; a server
that queues above 16 is held near 2× its latency; one that refuses above 16 sees ~1 request
in 8 refused while the limit is found, then few. A server whose service times are themselves
very noisy (exponential) and that queues is not told from a noisy workload: the limit stays
high (its 429s, 503s and timeouts still cut it). Retry-After is not this class's business:
the backend holds the replica (with one url, every request of the model).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

BACKOFF = 0.8  # the multiplicative decrease (TCP Reno halves; Netflix's AIMD keeps 0.9)
TOLERANCE = 2.0  # latency above this × the lowest: the server may be queueing
EXPLAINED = 1.25  # slack on what our load can explain (Little's law), for the noise of both estimates
ROUND = 16  # answers the averages are taken over, at least (more: the limit's worth)


class AdaptiveLimit:
    """The limit of one replica; `limit` is the number of requests it may have in flight now.

    The clock is injected so tests can replay a schedule of answers without waiting for it."""

    __slots__ = (
        "lo", "hi", "value", "_threshold", "_decreased_at", "_latency", "_in_flight",
        "_floor", "_throughput", "_undo", "_seen", "_since", "_clock",
    )

    def __init__(self, lo: int, hi: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.lo, self.hi = lo, hi
        self.value = float(lo)
        self._threshold = float(hi)  # slow start below it; it becomes the limit after a decrease
        self._decreased_at = -math.inf
        self._latency = 0.0  # averaged over about a round trip; 0 before the first answer
        self._in_flight = 0.0  # averaged alike: the load those latencies were measured at
        self._floor = math.inf  # the lowest average latency since it was last learnt
        self._throughput = 0.0  # the most (in flight / latency) since then: answers per second
        self._undo: tuple[float, float] | None = None  # (limit, threshold) before the cuts on latency since it was low
        self._seen = 0  # answers, up to ROUND: fewer make too short an average to judge
        self._since = 0  # answers since the last decrease
        self._clock = clock

    @property
    def limit(self) -> int:
        return int(self.value)

    def on_answer(self, sent_at: float, latency: float, in_flight: int) -> None:
        """A 2xx `latency` seconds after `sent_at`, which went with `in_flight` requests out at
        the replica (itself included)."""
        if self._latency == 0.0:
            self._latency, self._in_flight = latency, float(in_flight)
        else:
            w = 1.0 / max(ROUND, self.value)
            self._latency += w * (latency - self._latency)
            self._in_flight += w * (in_flight - self._in_flight)
        self._since += 1
        if self._seen < ROUND:
            self._seen += 1
            self._grow(in_flight)
            return
        smoothed, load = self._latency, self._in_flight
        self._floor = min(self._floor, smoothed)
        self._throughput = max(self._throughput, load / smoothed) if smoothed > 0.0 else self._throughput
        if smoothed <= TOLERANCE * self._floor:  # no queue
            self._undo = None  # a cut that brought latency back down was right
            self._grow(in_flight)
        elif smoothed * self._throughput > EXPLAINED * load:
            self._relearn()
        elif sent_at >= self._decreased_at and self._since >= self.value:
            if self._undo is None:
                self._undo = (self.value, self._threshold)
            self._decrease()

    def on_drop(self, sent_at: float) -> None:
        """A 429, 503 or timeout of a request sent at `sent_at`."""
        if sent_at >= self._decreased_at:  # else sent before the last decrease, which it is part of
            self._undo = None  # the server said so: no latency rule takes this cut back
            self._decrease()

    def _grow(self, in_flight: int) -> None:
        if 2 * in_flight >= self.value:
            self.value = min(self.hi, self.value + (1.0 if self.value < self._threshold else 1.0 / self.value))

    def _decrease(self) -> None:
        self.value = max(float(self.lo), self.value * BACKOFF)
        self._threshold = self.value
        self._decreased_at = self._clock()
        self._since = 0

    def _relearn(self) -> None:
        """More latency than our load explains: the floor and throughput are the work's from now
        on, and the cuts on latency since it was last low are undone."""
        self._floor, self._throughput = self._latency, self._in_flight / self._latency
        if self._undo is not None:
            self.value, self._threshold = max(self.value, self._undo[0]), self._undo[1]
            self._undo = None
