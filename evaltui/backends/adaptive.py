"""Adaptive concurrency: how many requests one replica is sent at once — the knee, where its
throughput stops growing and only its latency would.

The old rule (AIMD on a latency gradient, with Little's law to tell a queue from longer work)
never settled against a real llama.cpp server that serves one request at a time: answers of
varying length made its latency look like a change of work, not our queue, and the limit
wandered 64 → 17–52, holding latency ~16× above `max_workers = 4` for no more throughput.

What tells our queue from the work is an experiment, not a threshold: **a probe** compares the
mean latency of requests sent at the limit L with that of requests sent at a lower load L'
(half of L, or two thirds once the knee is roughly known), each over a window of requests
counted as they are sent (so a window's long answers count as much as its short ones). By
Little's law a server saturated at both loads answers L/L' times slower at L; one with no queue
at L answers as fast; in between, the ratio r puts the knee at L/r. Latency that varies with
the work alone moves both windows alike. Each verdict weighs the ratio against the windows'
own spread (standard errors): a probe too noisy to say is repeated with longer windows, and a
cut to the lower load on weak evidence is asked twice.

- **slow start**: from `lo`, +1 per answer (the limit doubles every round trip) while the
  latency stays within QUEUED × the latency at the start; a rise ends it, at the load the
  latency rose at, with a probe. At `hi` it only watches: a server that never queues is never
  probed for nothing.
- **probes**: a verdict of no queue at L lets the limit grow again (slow start, from the
  latency at L'); a knee (the median of the last few) sets the limit to GAIN × knee + 1, held
  until the next probe, which comes later the more probes agree; a server saturated at both
  loads sets it to L' and probes deeper. What probes learnt fades (FORGET a probe), so a
  server that gets faster or slower is followed.
- **drops** (429, 503, a timeout): the limit × BACKOFF, at most once per round trip (a request
  sent before the last decrease cannot cause another), then +1 per round trip; never below
  `lo` nor above `hi`.

Measured on an injected clock (tests/test_adaptive.py, closed loops) and against the simulator
playing a server that serves one, or eight, requests at a time (bench/adaptive.py,
bench/RESULTS.md). A server whose own service times are heavy-tailed (exponential, lognormal)
makes the windows noisy: the limit then sits higher above the knee than it must (its latency
up to a few times the best fixed setting's), never below it.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Callable

BACKOFF = 0.8  # the multiplicative decrease on a drop (TCP Reno halves; Netflix's AIMD keeps 0.9)
QUEUED = 2.0  # slow start ends once latency is this many times its base
GAIN = 1.25  # the limit over the knee: a little queue keeps the server busy between answers
MIN_N = 16  # requests a probe window sends, at least (and a round trip's)
MAX_N = 512  # at most, however noisy
SATURATED = 0.9  # a ratio this close to L/L': saturated at both loads
FLAT = 1.1  # a ratio below this (or within two standard errors of 1): no queue at L
KEEP = 5  # knees a median is taken over
FORGET = 1.15  # what probes learnt widens by this each probe
BASE_N = 16  # answers the slow start's base latency is the mean of
HOLD, HIGH, LOW, WAIT = "hold", "high", "low", "wait"


class _Window:
    """The requests one half of a probe sent, and what their answers took."""

    __slots__ = ("tag", "sent", "answered", "sum", "sq", "load")

    def __init__(self, tag: int) -> None:
        self.tag = tag
        self.sent = self.answered = self.load = 0
        self.sum = self.sq = 0.0

    def add(self, latency: float, load: int) -> None:
        self.answered += 1
        self.sum += latency
        self.sq += latency * latency
        self.load += load

    def done(self) -> bool:
        return self.answered >= self.sent

    def mean(self) -> float:
        return self.sum / self.answered if self.answered else 0.0

    def rse(self) -> float:
        """The relative standard error of the mean."""
        n, mean = self.answered, self.mean()
        if n < 2 or mean <= 0:
            return 1.0
        var = max(0.0, self.sq / n - mean * mean) * n / (n - 1)
        return math.sqrt(var / n) / mean


class AdaptiveLimit:
    """The limit of one replica; `limit` is the number of requests it may have in flight now.

    The replica's router tells it of each request sent (`on_send`, which returns a tag to give
    back) and how it ended (`on_answer`, `on_drop`, `on_unanswered`). The clock is injected so
    tests can replay a schedule of answers without waiting for it."""

    def __init__(self, lo: int, hi: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.lo, self.hi = lo, hi
        self.value = float(lo)  # the limit held (a probe's lower window goes below it for a while)
        self.slow_start = True
        self.growing = True  # no knee known: it may grow (after a drop: +1 a round trip)
        self._clock = clock
        self._mode = HOLD
        self._decreased_at = -math.inf
        self._wait = 0  # answers before the next probe
        self._stretch = 1  # windows this many times longer after a probe too noisy to judge
        self._tags = -1
        self._high: _Window | None = None
        self._low: _Window | None = None
        self._probe_value = self._low_value = 0
        self._knees: deque[float] = deque(maxlen=KEEP)
        self._knee_lo, self._knee_hi = 0.0, math.inf  # what probes said of the knee: at least, at most
        self._base = self._ewma = self._spread = 0.0
        self._rise = math.inf  # the latency that ends a slow start
        self._grow_to = math.inf  # the limit a slow start stops at to probe
        self._base_n = 0
        self._agree = 0  # probes in a row that left the limit where it was
        self._suspect = 0  # the load a weak "saturated" was seen at: a second one confirms it
        self.verdicts: deque[str] = deque(maxlen=32)  # the last probes, said (for a reader, and tests)

    @property
    def limit(self) -> int:
        return self._low_value if self._mode == LOW else int(self.value)

    def _rtt(self) -> int:
        """Answers in about a round trip at the limit."""
        return max(8, int(self.value))

    # ------------------------------------------------------------------ events
    def on_send(self) -> int:
        """A request goes out: the probe window it belongs to (0: none), given back with its answer."""
        mode = self._mode
        if mode == HIGH:
            w = self._high
            assert w is not None
            w.sent += 1
            if w.sent >= self._size(self._probe_value):
                self._mode, self._low = LOW, _Window(w.tag + 1)
            return w.tag
        if mode == LOW:
            w = self._low
            assert w is not None
            w.sent += 1
            if w.sent >= self._size(self._low_value):
                self._mode = WAIT
            return w.tag
        return 0

    def on_answer(self, sent_at: float, latency: float, in_flight: int, tag: int = 0) -> None:
        """A 2xx `latency` seconds after `sent_at`, which went with `in_flight` requests out at the
        replica (itself included); `tag` is what `on_send` said."""
        if self._high is not None:
            self._count(tag, latency, in_flight)
            if self._mode != HOLD:
                return
        busy = 2 * in_flight >= self.value  # the limit is what holds the requests back
        if self.slow_start:
            self._slow_start(latency, in_flight, busy)
            return
        if self.growing and busy:
            self.value = min(self.hi, self.value + 1.0 / self.value)
        self._wait -= 1
        if self._wait <= 0 and busy:
            if int(self.value) < 2 <= self.hi:
                self.value = 2.0  # a probe needs two loads to compare
            if int(self.value) >= 2:
                self._probe()

    def on_drop(self, sent_at: float, tag: int = 0) -> None:
        """A 429, 503 or timeout of a request sent at `sent_at`."""
        self.on_unanswered(tag)
        if sent_at >= self._decreased_at:  # else sent before the last decrease, which it is part of
            self.value = max(float(self.lo), self.value * BACKOFF)
            self._decreased_at = self._clock()
            self.slow_start, self.growing = False, True
            self._high = self._low = None
            self._mode = HOLD
            self._wait = 4 * self._rtt()

    def on_unanswered(self, tag: int) -> None:
        """A request that ended without an answer to learn from (dropped, failed, cancelled)."""
        for w in (self._high, self._low):
            if w is not None and w.tag == tag:
                w.sent -= 1
        self._maybe_judge()

    # ------------------------------------------------------------------ slow start
    def _slow_start(self, latency: float, in_flight: int, busy: bool) -> None:
        if self._base_n < BASE_N:
            n = self._base_n = self._base_n + 1
            delta = latency - self._base
            self._base += delta / n
            self._spread += delta * (latency - self._base)  # Welford: the base's own spread
            self._ewma = self._base
            if n == BASE_N:  # a rise must stand out of both the base's noise and the average's
                sd = math.sqrt(self._spread / (n - 1))
                self._rise = max(QUEUED * self._base, self._base + 2.5 * sd * (1 / math.sqrt(n) + 0.15))
        else:
            self._ewma += (latency - self._ewma) / (2 * BASE_N)
            if self._ewma > self._rise:  # a queue: what comes back now went out at in_flight
                self.slow_start = False
                self.value = max(float(self.lo), min(self.value, float(in_flight)))
                self._probe_or_wait()
                return
            ceiling = min(self._knee_hi * GAIN + 1, self._grow_to)
            if ceiling <= self.value < self.hi:  # as high as the last probes allow: ask again
                self.slow_start = False
                self.value = max(float(self.lo), ceiling)
                self._probe_or_wait()
                return
        if busy:
            self.value = min(self.hi, self.value + 1.0)

    def _probe_or_wait(self) -> None:
        if int(self.value) >= 2:
            self._probe()
        else:
            self._wait = self._rtt()

    def _restart(self, window: _Window) -> None:
        """Grow again (or, at `hi`, watch) while the latency stays within QUEUED × the window's
        (and out of its noise)."""
        self.slow_start = True
        base = window.mean() or self._base
        self._base, self._ewma, self._base_n = base, base, BASE_N
        self._rise = max(QUEUED * base, base * (1 + 2.5 * window.rse() * (1 + 0.15 * math.sqrt(window.answered))))

    # ------------------------------------------------------------------ probes
    def _size(self, load: int) -> int:
        return min(MAX_N, max(MIN_N, load) * self._stretch)

    def _probe(self) -> None:
        self._mode = HIGH
        self._probe_value = v = int(self.value)
        deep = self._knee_lo == 0.0  # nothing known below: look at half
        self._low_value = max(self.lo, min(v - 1, v // 2 if deep else round(v * 2 / 3)))
        self._tags += 2
        self._high, self._low = _Window(self._tags), None

    def _count(self, tag: int, latency: float, in_flight: int) -> None:
        high, low = self._high, self._low
        assert high is not None
        if tag == high.tag:
            high.add(latency, in_flight)
        elif low is not None and tag == low.tag:
            low.add(latency, in_flight)
        self._maybe_judge()

    def _maybe_judge(self) -> None:
        high, low = self._high, self._low
        if self._mode == WAIT and high is not None and low is not None and high.done() and low.done():
            self._high = self._low = None
            self._mode = HOLD
            self._judge(high, low)

    def _judge(self, high: _Window, low: _Window) -> None:
        value, low_value = self._probe_value, self._low_value
        if high.answered < 4 or low.answered < 4 or 4 * high.load < 3 * value * high.answered:
            self._unsure(low, "not busy enough to tell")  # the model had less to send than its limit
            return
        ratio = high.mean() / low.mean() if low.mean() > 0 else 1.0
        full = value / low_value  # the ratio of a server saturated at both loads
        rse = math.hypot(high.rse(), low.rse())
        if ratio > 2 * full or ratio < 0.5:  # more than our own queue explains: the work changed meanwhile
            self._unsure(low, f"{ratio:.2f}: the work changed")
            return
        not_flat = ratio > max(FLAT, 1 + 3 * rse)  # a queue at L, for sure
        not_saturated = ratio < full * (1 - 3 * rse)  # room below L, for sure
        saturated = not_flat and ratio >= min(SATURATED * full, full * (1 - 2 * rse))
        if not (not_flat or not_saturated) or (saturated and ratio <= 1 + 6 * rse and self._suspect != value):
            self._suspect = value if saturated else 0  # a cut to L' on weak evidence is asked twice
            self._unsure(low, f"{ratio:.2f} ± {rse:.2f}")
            return
        self._suspect = 0
        self._stretch = max(1, self._stretch // 2)
        self._knee_lo, self._knee_hi = self._knee_lo / FORGET, self._knee_hi * FORGET
        if not not_flat:
            said = "no queue"
            self._knee_lo = max(self._knee_lo, float(value))
            if self._knee_hi < 1.2 * self._knee_lo:  # none where an earlier probe saw one
                self._knee_hi = math.inf
        elif saturated:
            said = "saturated at both"
            self._knee_hi = min(self._knee_hi, float(low_value))
            self._knees.clear()
            if self._knee_lo > self._knee_hi:
                self._knee_lo = 0.0
        else:
            self._knees.append(value / min(ratio, full))
            knee = statistics.median(self._knees)
            self._knee_lo, self._knee_hi = knee / 1.2, knee * 1.2
            said = f"knee {knee:.1f}"
        self._settle(high, low, f"{value} vs {low_value}: {ratio:.2f} ± {rse:.2f}, {said}")

    def _settle(self, high: _Window, low: _Window, said: str) -> None:
        before = self.value
        had_knee = self.growing is False
        self.growing = self._knee_hi == math.inf
        if self.growing:
            # a knee known before and no queue now: a step (double) at a time, each probed
            self._grow_to = 2.0 * self._probe_value if had_knee else math.inf
            self._restart(high if self._probe_value >= self.hi else low)
            self.verdicts.append(f"{said}: grows")
            return
        target = self._knee_hi if self._knee_lo == 0.0 else math.sqrt(self._knee_lo * self._knee_hi) * GAIN + 1
        self.value = max(float(self.lo), min(float(self.hi), target))
        self._agree = 0 if abs(self.value - before) > 0.2 * before else self._agree + 1
        self._wait = min(64, 2 ** (1 + self._agree)) * self._rtt()
        self.verdicts.append(f"{said}: limit {int(self.value)}")

    def _unsure(self, low: _Window, why: str) -> None:
        """No verdict: the next probe's windows are longer; a weak "saturated" is asked again at
        once; otherwise a slow start goes on, a held limit stays."""
        self._stretch = min(MAX_N // MIN_N, 2 * self._stretch)
        self.verdicts.append(f"{self._probe_value} vs {self._low_value}: {why}, unsure")
        if self._suspect:
            self._wait = 0
        elif self.growing and self._knee_hi == math.inf and self._probe_value < self.hi:
            self._restart(low)
        else:
            self._wait = 2 * self._rtt()
