"""Pacing: when a request may go. The token budget (`tokens_per_minute`: `TokenBudget`), charged
before a request is sent and settled after; then (at the end) the request rate (`rate_per_worker`,
`requests_per_minute`: `TokenBucket`) and the waits between a request's attempts (`Backoff`, a
server's Retry-After).

A request's tokens are known only once the server has counted them, so it is charged an
estimate (its prompt's and `max_new_tokens`) when it goes, and the reply's `usage` settles the
charge. Two rules make that work:

- Tokens the server counted are paid off at the budget's rate, and a request goes only once
  they are (`_paid` ≤ now): over a long run the rate is the budget, exactly.
- The estimates of the requests in flight must fit AHEAD seconds of the budget (a tenth of a
  minute), so the requests one minute sends cannot use more than 10 % above it even when each
  uses all of its `max_new_tokens`. A settlement wakes the oldest waiter to look again (the
  others wait their turn behind it), so an overestimate is given back at once: with
  `max_new_tokens = 512` and answers of a dozen tokens, a schedule fixed when a request was
  charged let one request out at a time and ran at 0.58 of the budget (bench/fleet.py).
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import anyio

AHEAD = 6.0  # seconds of the budget the estimates of the requests in flight may take (a tenth of a minute)


def estimate_tokens(text: str) -> int:
    """A prompt's tokens before the server has counted them: its UTF-8 bytes / 4, rounded up.

    ~4 bytes a token is what BPE tokenizers give for English text and code; for CJK (3 bytes a
    character, often 1-2 tokens) it undercounts, and a whitespace split would undercount worse
    (code and CJK have few spaces). No tokenizer of the model is at hand, and none is needed:
    the charge is corrected by the usage the reply reports, so the estimate only shapes the
    first seconds and replies that report nothing.
    """
    return (len(text.encode("utf-8")) + 3) // 4


class TokenBudget:
    """`per_minute` tokens a minute over every caller, spread evenly (see the module's docstring).

    The clock and sleep are injectable so tests can check the schedule without waiting for it.
    """

    def __init__(
        self,
        per_minute: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        *,
        ahead: float = AHEAD,
    ) -> None:
        self.interval = 60.0 / per_minute  # seconds per token
        self.ahead = ahead
        self._clock = clock
        self._sleep = sleep
        self._paid = -math.inf  # when the tokens the server counted are paid off
        self._held = 0.0  # the estimates of the requests in flight, in tokens
        self._queue: deque[anyio.Event] = deque()  # callers waiting, oldest first
        self._nap: anyio.CancelScope | None = None  # the oldest one's sleep, which a settlement cuts short

    async def acquire(self, cost: float) -> None:
        """Wait until the budget has room for `cost` more tokens in flight, then hold them."""
        if not self._queue and self._wait(cost) <= 0:
            self._hold(cost)
            return
        turn = anyio.Event()
        self._queue.append(turn)
        try:
            if self._queue[0] is not turn:
                await turn.wait()
            while (wait := self._wait(cost)) > 0:
                with anyio.CancelScope() as nap:
                    self._nap = nap
                    await (self._sleep(wait) if wait != math.inf else anyio.sleep_forever())  # until a settlement
                self._nap = None
            self._hold(cost)
        finally:
            if self._queue[0] is turn:  # only the oldest sleeps in _nap: a waiter behind it leaves it be
                self._nap = None
            self._queue.remove(turn)
            if self._queue:
                self._queue[0].set()

    def settle(self, cost: float, used: float) -> None:
        """A request held `cost` and the server counted `used` (0: it generated nothing)."""
        self._held = max(0.0, self._held - cost)
        self._paid += used * self.interval
        if self._nap is not None:
            self._nap.cancel()

    def _wait(self, cost: float) -> float:
        """Seconds until `cost` more may go: the counted tokens paid off; and the estimates in
        flight, this one's included, within `ahead` of the budget — which only a settlement can
        make true (inf) — though one request may always be in flight."""
        if self._held and (self._held + cost) * self.interval > self.ahead:
            return math.inf
        return self._paid - self._clock()

    def _hold(self, cost: float) -> None:
        """Tokens are spent from the moment they go: credit from an idle stretch is not kept."""
        self._paid = max(self._paid, self._clock())
        self._held += cost


class TokenBucket:
    """`rate` requests per second shared by every caller: one token every 1/rate s, no burst.

    Each caller reserves its slot before it sleeps, and reservation has no await in it, so any
    number of concurrent callers together never exceed the rate. The clock and sleep are
    injectable so tests can check the schedule without waiting for it.
    """

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ):
        self.rate = rate
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None  # when the next token is free
        self._held_until = 0.0  # a server's Retry-After: no caller goes before then

    def hold(self, seconds: float) -> None:
        """A 429 with Retry-After speaks for the server, not for one request: every caller waits."""
        self._held_until = max(self._held_until, self._clock() + seconds)

    async def acquire(self, *, held: bool = True) -> None:
        """`held=False` for the request that already slept out the Retry-After it was given."""
        now = self._clock()
        at = max(now, self._held_until) if held else now
        if self.interval != 0.0:
            at = at if self._next is None else max(self._next, at)
            self._next = at + self.interval
        if at > now:
            await self._sleep(at - now)


MAX_BACKOFF = 60.0
MAX_RETRY_AFTER = 300.0  # s a Retry-After is honoured for at most (README: "How it works")


@dataclass
class Backoff:
    """Exponential backoff with jitter: attempt k waits base·2^(k-1) · U(0.5, 1], at most `cap`."""

    base: float = 1.0
    cap: float = MAX_BACKOFF
    rng: random.Random | None = None

    def delay(self, retry_number: int, retry_after: float | None = None) -> float:
        rng = self.rng or random
        d: float = min(self.cap, self.base * 2 ** (retry_number - 1)) * (0.5 + 0.5 * rng.random())
        if retry_after is not None:
            d = max(d, min(retry_after, MAX_RETRY_AFTER))
        return d


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
