"""A model's replicas: which one takes the next request, and which are out of service.

One model may be served by several servers (vLLM/SGLang/LightLLM replicas behind no gateway, two
regions of an API). Each attempt asks the Router for a replica and gives it back with the
outcome, and the Router keeps, per replica:

- **routing**: the next attempt goes to the replica with the fewest requests in flight, ties in
  turn (round robin), below its cap (`max_workers_per_url`, or its adaptive limit); a retry
  goes elsewhere when it can. An attempt that finds every replica at its cap waits its turn
  (first come, first served: a freed slot is handed to the oldest waiter, never taken by a
  newcomer).
- **ejection** (several replicas only, once one of them has answered in this run, so a wrong
  URL still fails as fast as ever): EJECT_AFTER failures in a row (no reply, a timeout, a 5xx)
  take a replica out for a back-off (FIRST_BACK_OFF s, doubling per failed probe up to
  MAX_BACK_OFF); then the backend's health check (`/health` for LightLLM, `/v1/models` for
  OpenAI-style servers) probes it, and it comes back when that answers 2xx. Attempts that were
  out at a replica when it was ejected, and failed, are sent again elsewhere without counting
  against their request's `retry` (`release` says so).
- **all down**: when every replica is out, attempts wait for one to come back; after
  `down_timeout` s they fail with ReplicasDown (and so does any attempt while it lasts), which
  the engine turns into a stop of the model with that reason. Nothing waits forever.

With one URL none of this runs: the Router hands the replica out at once (the worker pool is
the bound), and failures are the retry loop's business as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
from yarl import URL

from evaltui.backends.adaptive import AdaptiveLimit

UP, EJECTED, PROBING = "up", "ejected", "probing"
EJECT_AFTER = 3
FIRST_BACK_OFF = 1.0
MAX_BACK_OFF = 30.0
NO_REPLY, TIMED_OUT = 0, -1  # `status` of an attempt that got no HTTP reply
_DROPS = frozenset({429, 503, TIMED_OUT})  # what tells an adaptive limit the server is full


class ReplicasDown(Exception):
    """Every replica has been out for `down_timeout` s; the message names them and why."""


class Replica:
    """One server of a model, with its counters (read by the engine once a second)."""

    __slots__ = (
        "index", "url", "endpoint", "health", "state", "in_flight", "cap", "limit",
        "requests", "errors", "failures", "epoch", "back_off", "due", "reason", "failed_probes",
    )

    def __init__(self, index: int, url: str, endpoint: URL, health: URL, cap: int, limit: AdaptiveLimit | None) -> None:
        self.index, self.url, self.endpoint, self.health = index, url, endpoint, health
        self.state = UP
        self.in_flight = 0
        self.cap = cap  # fixed concurrency: at most this many in flight
        self.limit = limit  # adaptive concurrency: its limit instead
        self.requests = 0  # attempts answered or failed
        self.errors = 0  # of those, the ones without a 2xx
        self.failures = 0  # in a row: no reply, timeout, 5xx
        self.epoch = 0  # times ejected: an attempt sent in an earlier epoch was out when it happened
        self.back_off = FIRST_BACK_OFF
        self.due = 0.0  # when an ejected replica is probed
        self.reason = ""  # why it was ejected (its last error, or the health check's)
        self.failed_probes = 0  # in a row, since it was ejected

    def capacity(self) -> int:
        return self.limit.limit if self.limit is not None else self.cap


Listener = Callable[[Replica], None]
Probe = Callable[[Replica], Awaitable[str | None]]  # None: healthy; else what was wrong


class Router:
    def __init__(
        self,
        replicas: list[Replica],
        *,
        down_timeout: float,
        probe: Probe,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.replicas = replicas
        self.down_timeout = down_timeout
        self.in_flight = 0
        self.seen = False  # a replica answered in this run: ejection may begin
        self.down_since: float | None = None  # every replica out since then
        self.on_change: Listener | None = None  # a replica changed state (the engine reports it)
        self.on_down: Callable[[str], None] | None = None  # every replica is out; the model waits
        self._probe = probe
        self._clock = clock
        self._several = len(replicas) > 1
        self._only = None if self._several or replicas[0].limit is not None else replicas[0]  # the fast path
        self._turn = 0  # where the round robin starts looking
        self._waiters: deque[tuple[asyncio.Future[Replica], Replica | None]] = deque()
        self._gave_up = ""  # the ReplicasDown message, once down_timeout has passed
        self._down_timer: asyncio.TimerHandle | None = None
        self._changed = asyncio.Event()  # wakes the prober: a replica was ejected

    # ------------------------------------------------------------------ per attempt
    async def acquire(self, avoid: Replica | None = None) -> Replica:
        """A replica for one attempt (not `avoid`, the one the last attempt failed on, when
        another can take it); waits while every replica is at its cap or out."""
        only = self._only
        if only is not None:
            only.in_flight += 1
            self.in_flight += 1
            return only
        if self._gave_up:
            raise ReplicasDown(self._gave_up)
        if not self._waiters:
            r = self._pick(avoid)
            if r is not None:
                r.in_flight += 1
                self.in_flight += 1
                return r
        return await self._wait(avoid)

    def release(self, r: Replica, epoch: int, sent_at: float, status: int, error: str = "") -> bool:
        """An attempt sent to `r` in `epoch` at `sent_at` ended with `status` (NO_REPLY, TIMED_OUT
        or the HTTP status). True when it failed because `r` went out of service meanwhile (or
        now): the request is sent again elsewhere, and this attempt does not count."""
        r.in_flight -= 1
        self.in_flight -= 1
        r.requests += 1
        if 200 <= status < 300:
            self.seen = True
            r.failures = 0
            if r.limit is not None:
                r.limit.on_answer(sent_at, self._clock() - sent_at, r.in_flight + 1)
            if self._waiters:
                self._hand_off()
            return False
        r.errors += 1
        if r.limit is not None and status in _DROPS:
            r.limit.on_drop(sent_at)
        failed = status <= NO_REPLY or status >= 500
        if not failed:  # 4xx: the server is there
            self.seen = True
            r.failures = 0
        elif self._several:
            r.failures += 1
            if r.failures >= EJECT_AFTER and r.state == UP and self.seen:
                self._eject(r, error)
        if self._waiters:
            self._hand_off()
        return failed and r.epoch != epoch

    # ------------------------------------------------------------------ routing
    def _pick(self, avoid: Replica | None) -> Replica | None:
        """The up replica with the fewest in flight below its cap, ties in turn; `avoid` only
        when nothing else can take the attempt."""
        best: Replica | None = None
        n = len(self.replicas)
        for k in range(n):
            r = self.replicas[(self._turn + k) % n]
            if r.state != UP or r.in_flight >= r.capacity() or r is avoid:
                continue
            if best is None or r.in_flight < best.in_flight:
                best = r
        if best is None:
            if avoid is None or avoid.state != UP or avoid.in_flight >= avoid.capacity():
                return None
            best = avoid
        self._turn = (best.index + 1) % n
        return best

    async def _wait(self, avoid: Replica | None) -> Replica:
        fut: asyncio.Future[Replica] = asyncio.get_running_loop().create_future()
        entry = (fut, avoid)
        self._waiters.append(entry)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release_unused(fut.result())  # handed a replica just as it was cancelled
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)
            raise

    def release_unused(self, r: Replica) -> None:
        """Give back a replica no request was sent to."""
        r.in_flight -= 1
        self.in_flight -= 1
        if self._waiters:
            self._hand_off()

    def _hand_off(self) -> None:
        """Freed capacity goes to the oldest waiters, directly: a newcomer cannot take it first."""
        waiters = self._waiters
        while waiters:
            fut, avoid = waiters[0]
            if fut.done():  # cancelled meanwhile
                waiters.popleft()
                continue
            r = self._pick(avoid)
            if r is None:
                return
            waiters.popleft()
            r.in_flight += 1
            self.in_flight += 1
            fut.set_result(r)

    # ------------------------------------------------------------------ out of service
    def _eject(self, r: Replica, reason: str) -> None:
        r.state, r.reason, r.failed_probes = EJECTED, reason, 0
        r.epoch += 1
        r.due = self._clock() + r.back_off
        self._changed.set()
        self._notify(r)
        if all(x.state != UP for x in self.replicas) and self.down_since is None:
            self._all_down()

    def _all_down(self) -> None:
        self.down_since = self._clock()
        self._down_timer = asyncio.get_running_loop().call_later(self.down_timeout, self._give_up)
        if self.on_down is not None:
            self.on_down(self._why())

    def _why(self) -> str:
        return "; ".join(f"{r.url}: {r.reason or r.state}" for r in self.replicas)

    def _give_up(self) -> None:
        """down_timeout passed with every replica out: each waiting attempt fails, and so does
        any new one until a replica is back."""
        self._down_timer = None
        self._gave_up = f"every replica was down for {self.down_timeout:g} s ({self._why()})"
        while self._waiters:
            fut, _ = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(ReplicasDown(self._gave_up))

    def _back(self, r: Replica) -> None:
        r.state, r.failures, r.back_off, r.reason, r.failed_probes = UP, 0, FIRST_BACK_OFF, "", 0
        if self.down_since is not None:
            self.down_since, self._gave_up = None, ""
            if self._down_timer is not None:
                self._down_timer.cancel()
                self._down_timer = None
        self._notify(r)
        self._hand_off()

    def restart(self) -> None:
        """More work came after the model stopped waiting: it may wait its down_timeout again."""
        if self._gave_up:
            self._gave_up, self.down_since = "", None
            self._all_down()

    def _notify(self, r: Replica) -> None:
        if self.on_change is not None:
            self.on_change(r)

    async def run_probes(self) -> None:
        """Probe each ejected replica once its back-off is over; runs until cancelled (the
        worker pool runs it beside its workers, with several replicas only)."""
        while True:
            self._changed.clear()
            now = self._clock()
            out = [r for r in self.replicas if r.state == EJECTED]
            ready = [r for r in out if r.due <= now]
            if ready:
                async with anyio.create_task_group() as tg:
                    for r in ready:
                        tg.start_soon(self._probe_one, r)
                continue
            wait = min((r.due for r in out), default=now + 3600.0) - now
            with anyio.move_on_after(wait):
                await self._changed.wait()

    async def _probe_one(self, r: Replica) -> None:
        r.state = PROBING
        self._notify(r)
        try:
            problem = await self._probe(r)
        except Exception as e:  # a bug in a probe must cost a probe, not the run
            problem = f"{type(e).__name__}: {e}"
        if problem is None:
            self._back(r)
            return
        r.state, r.reason = EJECTED, f"health check: {problem}"
        r.failed_probes += 1
        r.back_off = min(MAX_BACK_OFF, 2 * r.back_off)
        r.due = self._clock() + r.back_off
        self._notify(r)

    # ------------------------------------------------------------------ reports
    def limit(self, max_workers: int) -> int:
        """Requests the model may have in flight now: its replicas' caps (or limits) added up,
        at most `max_workers`."""
        up = sum(r.capacity() for r in self.replicas if r.state == UP)
        return min(max_workers, up)
