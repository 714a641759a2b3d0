"""A model's replicas: which one takes the next request, and which are out of service.

One model may be served by several servers (vLLM/SGLang/LightLLM replicas behind no gateway, two
regions of an API). Each attempt asks the Router for a replica and gives it back with the
outcome, and the Router keeps, per replica:

- **routing**: the next attempt goes to the replica with the fewest requests in flight, ties in
  turn (round robin), below its cap (`max_workers_per_url`, or its adaptive limit); a retry
  goes elsewhere when it can. A replica in doubt — its last attempt failed or was refused —
  takes one attempt at a time until one is answered (a circuit breaker's half-open state): one
  that fails at once always has the fewest in flight, and by that rule alone would draw nearly
  every request; one at a time, it is found out in EJECT_AFTER quick attempts. Before any
  replica has answered, one in doubt is sent an attempt only when no other can take it. An
  attempt that finds every replica at its cap waits its turn (first come, first served: a freed
  slot is handed to the oldest waiter, never taken by a newcomer).
- **holds**: a 429 (or 503) with Retry-After takes its replica out of routing until then; the
  others go on (with one url the backend holds every request of the model instead).
- **ejection** (several replicas only, once one of them has answered in this run, so a wrong
  URL still fails as fast as ever): EJECT_AFTER failures in a row (no reply, a timeout, a 5xx
  other than 503) take a replica out for a back-off (replica.py says how long), then the
  backend's health check probes it, each replica on its own. Refusals (429, 503) say the
  server is full, not broken: they tell the adaptive limit, and eject only a replica that has
  refused everything for REFUSING_FOR s.
- **free re-sends**: an attempt that got no reply (connection refused, reset) or was refused
  while another replica could take it says nothing about its request; neither does one that was
  out at a replica when it was ejected. Such an attempt is sent again elsewhere without
  counting against its request's `retry` (`release` says so; the backend bounds how often).
- **all down**: when every replica is out, attempts wait for one to come back; after
  `down_timeout` s they fail with ReplicasDown (and so does any attempt while it lasts), which
  the engine turns into a stop of the model with that reason. Nothing waits forever.

With one URL the model is a fleet of one (a real llama.cpp restarted 20 s later failed 5 of 8
samples that went through the outage, where two URLs lost nothing): its replica is handed out
at once while it is up. Once it has answered in the run, an attempt that got no reply asks its
health check (`confirm_down`): unanswered, the server is marked down, requests wait while it is
probed (at most `down_timeout`) and those attempts are sent again without counting against
`retry`. A server that answers it dropped that one request: it counts, as ever; its HTTP errors
and timeouts are the retry loop's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable

import anyio

from evaltui.backends.replica import (
    DROPS,
    EJECT_AFTER,
    EJECTED,
    FIRST_BACK_OFF,
    HEALTHY_FOR,
    MAX_BACK_OFF,
    NO_REPLY,
    PROBE_MAX,
    PROBING,
    REFUSALS,
    REFUSING_FOR,
    UP,
    Replica,
    ReplicasDown,
    in_doubt,
)

LAST = 1 << 30  # added to a replica's load in routing: it is picked only when no other can be


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
        self._wake = [asyncio.Event() for _ in replicas]  # wakes a replica's prober: it was ejected
        self._marks = [(0, 0) for _ in replicas]  # each replica's (requests, errors) when `mark` was called
        self._holds = False  # some replica was held (routing reads the clock from then on)
        self._confirming: asyncio.Task[bool] | None = None  # a lone url's health check after no reply

    # ------------------------------------------------------------------ per attempt
    async def acquire(self, avoid: Replica | None = None) -> Replica:
        """A replica for one attempt (not `avoid`, the one the last attempt failed on, when
        another can take it); waits while every replica is at its cap, held or out."""
        only = self._only
        if only is not None and only.state == UP:
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

    def release(self, r: Replica, epoch: int, sent_at: float, status: int, error: str = "", load: int = 1, tag: int = 0) -> bool:
        """An attempt sent to `r` in `epoch` at `sent_at`, with `load` attempts out at `r` then
        (itself included), ended with `status` (NO_REPLY, TIMED_OUT or the HTTP status); `tag` is
        what its adaptive limit's `on_send` said of it. True
        when it says nothing about its request (see "free re-sends" in the module's docstring):
        it is sent again elsewhere, and does not count."""
        r.in_flight -= 1
        self.in_flight -= 1
        r.attempts += 1
        if 200 <= status < 300:
            self._answered(r, sent_at, load, tag)
            free = False
        else:
            r.errors += 1
            if r.limit is not None:
                if status in DROPS:
                    r.limit.on_drop(sent_at, tag)
                else:
                    r.limit.on_unanswered(tag)
            free = self._failed(r, epoch, status, error) if self._several else self._failed_alone(r, epoch, status, error)
        if self._waiters:
            self._hand_off()
        return free

    def _answered(self, r: Replica, sent_at: float, load: int, tag: int) -> None:
        r.failures, r.refused_since = 0, None
        if r.limit is not None:
            r.limit.on_answer(sent_at, self._clock() - sent_at, load, tag)
        if not self.seen:
            self.seen = True  # the first answer: the replicas that failed before it go out now
            for x in self.replicas:
                if x.failures >= EJECT_AFTER and x.state == UP:
                    self._eject(x, x.reason)

    def _failed(self, r: Replica, epoch: int, status: int, error: str) -> bool:
        """A failed attempt at one of several replicas: ejection, and whether it is free."""
        now = self._clock()
        if status in REFUSALS:
            if r.refused_since is None:
                r.refused_since = now
            elif now - r.refused_since >= REFUSING_FOR and r.state == UP and self.seen:
                self._eject(r, f"refused every request for {REFUSING_FOR:g} s ({error})")
            return self._other_can_take(r, now)
        if not (status <= NO_REPLY or status >= 500):  # another 4xx: the server is there
            self.seen = True
            r.failures = 0
            return False
        r.failures += 1
        r.reason = error  # why, should it be ejected before any replica answered
        if r.failures >= EJECT_AFTER and r.state == UP and self.seen:
            self._eject(r, error)
        return status == NO_REPLY or r.epoch != epoch

    def _failed_alone(self, r: Replica, epoch: int, status: int, error: str) -> bool:
        """A failed attempt at a model's one url: free when it was out as the server went down;
        one that got no reply is judged by `confirm_down` (the backend asks)."""
        if status == NO_REPLY:
            r.reason = error
        return r.epoch != epoch

    async def confirm_down(self, r: Replica, epoch: int) -> bool:
        """An attempt sent in `epoch` to a model's one url got no reply (refused or cut): whether
        its server is down. A cut alone cannot tell a server that restarts from one that dropped
        this request, so its health check is asked (one probe shared by every attempt that asks
        meanwhile): no answer marks it down, and the attempt is free — it waits for the server
        instead of spending its request's retries. Before the server has answered in this run
        (a wrong url?) the retry loop decides, as ever."""
        if self._several or not self.seen:
            return False
        if r.epoch != epoch or r.state != UP:
            return True  # marked down since it was sent
        if self._confirming is None:
            self._confirming = asyncio.get_running_loop().create_task(self._confirm(r))
        return await asyncio.shield(self._confirming)

    async def _confirm(self, r: Replica) -> bool:
        try:
            try:
                problem = await self._probe(r)
            except Exception as e:  # a bug in a probe must cost a probe, not the run
                problem = f"{type(e).__name__}: {e}"
            if problem is None:
                return False
            if r.state == UP:
                self._eject(r, f"{r.reason} (its health check: {problem})")
            return True
        finally:
            self._confirming = None

    def hold(self, r: Replica, seconds: float) -> None:
        """A Retry-After from `r`: no attempt goes to it for `seconds`."""
        until = self._clock() + seconds
        if until > r.held_until:
            r.held_until = until
            self._holds = True
            asyncio.get_running_loop().call_later(seconds, self._hand_off)  # its waiters may go then

    # ------------------------------------------------------------------ routing
    def _pick(self, avoid: Replica | None) -> Replica | None:
        """The open replica with the fewest in flight, ties in turn; `avoid` only when nothing
        else can take the attempt."""
        best: Replica | None = None
        least = 0
        replicas, n, seen = self.replicas, len(self.replicas), self.seen
        now = self._clock() if self._holds else 0.0
        for k in range(n):  # _open and _in_doubt, inlined: this runs for every attempt
            r = replicas[(self._turn + k) % n]
            if r is avoid or r.state != UP or r.held_until > now:
                continue
            doubt = r.failures > 0 or r.refused_since is not None
            load = r.in_flight
            if load >= (1 if doubt else r.capacity()):
                continue
            if doubt and not seen:
                load += LAST  # nothing has answered yet: one that failed goes only where no other can
            if best is None or load < least:
                best, least = r, load
        if best is None:
            if avoid is None or not self._open(avoid, now):
                return None
            best = avoid
        self._turn = (best.index + 1) % n
        return best

    @staticmethod
    def _open(r: Replica, now: float) -> bool:
        """Whether `r` may take an attempt now: up, not held, below its cap — or, in doubt,
        with none in flight."""
        if r.state != UP or r.held_until > now:
            return False
        return r.in_flight < (1 if in_doubt(r) else r.capacity())

    def _other_can_take(self, r: Replica, now: float) -> bool:
        return any(x is not r and self._open(x, now) for x in self.replicas)

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

    def release_unused(self, r: Replica, tag: int = 0) -> None:
        """Give back a replica no request was sent to (or one cut short: `tag`, its limit's)."""
        if tag and r.limit is not None:
            r.limit.on_unanswered(tag)
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
        now = self._clock()
        soon = now - r.back_at < HEALTHY_FOR  # back only a little while: it waits longer this time
        r.ejected_for = min(MAX_BACK_OFF, 2 * r.ejected_for) if soon and r.ejected_for else FIRST_BACK_OFF
        r.state, r.reason, r.failed_probes, r.back_off = EJECTED, reason, 0, r.ejected_for
        r.epoch += 1
        r.due = now + r.back_off
        self._wake[r.index].set()
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
        r.state, r.failures, r.reason, r.failed_probes = UP, 0, "", 0
        r.back_at, r.refused_since = self._clock(), None
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
        """Probe each ejected replica once its back-off is over, each on its own; runs until
        cancelled (the worker pool runs it beside its workers, with several replicas only)."""
        async with anyio.create_task_group() as tg:
            for r in self.replicas:
                tg.start_soon(self._prober, r)

    async def _prober(self, r: Replica) -> None:
        wake = self._wake[r.index]
        while True:
            wake.clear()
            wait = math.inf
            if r.state == EJECTED:
                wait = r.due - self._clock()
                if wait <= 0:
                    await self._probe_one(r)
                    continue
            with anyio.move_on_after(wait):
                await wake.wait()

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
        r.back_off = min(PROBE_MAX, 2 * r.back_off)
        r.due = self._clock() + r.back_off
        self._notify(r)

    # ------------------------------------------------------------------ reports
    def mark(self) -> None:
        """From now on `silent` looks only at the attempts made after this call."""
        self._marks = [(r.attempts, r.errors) for r in self.replicas]

    def silent(self) -> bool:
        """Every replica was tried since `mark` and every attempt failed (a 4xx counts as failed)."""
        return all(r.attempts > n and r.errors - e == r.attempts - n for r, (n, e) in zip(self.replicas, self._marks, strict=True))

    def limit(self, max_workers: int) -> int:
        """Requests the model may have in flight now: its replicas' caps (or limits) added up,
        at most `max_workers`."""
        up = sum(r.capacity() for r in self.replicas if r.state == UP)
        return min(max_workers, up)
