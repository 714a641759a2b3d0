"""The adaptive concurrency limit (AIMD with a latency gradient), replayed on an injected clock:
answer by answer, and as a closed loop against model servers (one whose latency does not depend
on load, one that queues, one that refuses), where what counts is the run's time against a
fixed 64 and what the server had to queue or refuse."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

import pytest

from evaltui.backends.adaptive import BACKOFF, ROUND, TOLERANCE, AdaptiveLimit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def answers(limit: AdaptiveLimit, clock: Clock, n: int, latency: float = 0.05, busy: bool = True) -> None:
    """`n` answers of `latency`, each sent now (the clock moves on by the latency each round)."""
    for _ in range(n):
        sent = clock.now
        clock.now += latency / max(1, limit.limit)
        limit.on_answer(sent, latency, limit.limit if busy else 0)


def test_slow_start_doubles_the_limit_every_round_trip_up_to_its_ceiling() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    assert limit.limit == 1
    seen = []
    for _ in range(5):
        answers(limit, clock, limit.limit)  # one round trip: as many answers as the limit
        seen.append(limit.limit)
    assert seen == [2, 4, 8, 16, 32]
    answers(limit, clock, 200)
    assert limit.limit == 64  # never above hi


def test_a_drop_multiplies_the_limit_by_the_backoff_then_it_grows_by_one_per_round_trip() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    answers(limit, clock, 19)  # slow start to 20
    assert limit.limit == 20
    clock.now += 1
    limit.on_drop(clock.now)
    assert limit.value == pytest.approx(20 * BACKOFF)
    before = limit.value
    answers(limit, clock, 16)  # about one round trip of answers at 16
    assert limit.value == pytest.approx(before + 1, abs=0.1)  # additive now, not slow start


def test_a_burst_of_drops_from_one_round_trip_decreases_once() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    answers(limit, clock, 31)
    sent = clock.now
    clock.now += 0.01
    for _ in range(10):  # ten 429s of requests sent before the first of them came back
        limit.on_drop(sent)
    assert limit.value == pytest.approx(32 * BACKOFF)
    clock.now += 0.01
    limit.on_drop(clock.now)  # one sent after the decrease counts again
    assert limit.value == pytest.approx(32 * BACKOFF * BACKOFF)


def test_drops_never_take_it_below_lo() -> None:
    clock = Clock()
    limit = AdaptiveLimit(4, 64, clock=clock)
    for _ in range(50):
        clock.now += 1
        limit.on_drop(clock.now)
    assert limit.limit == 4


def test_latency_a_little_above_the_minimum_is_no_queue() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    answers(limit, clock, 30, latency=0.05)
    before = limit.value
    answers(limit, clock, 30, latency=0.05 * (TOLERANCE - 0.5))
    assert limit.value > before


def test_an_idle_model_does_not_inflate_its_limit() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    answers(limit, clock, 7)
    assert limit.limit == 8
    answers(limit, clock, 100, busy=False)  # answers while far less than half the limit is in use
    assert limit.limit == 8


# ------------------------------------------------------------------------------ closed loops

Latency = Callable[[int, int], float]  # (request number, in flight when it was sent) -> seconds


class Loop:
    """`n` requests through `limiter` (an AdaptiveLimit, or None for a fixed `fixed`), each sent
    as soon as the limit has room, against a server given by `latency`; above `refuse_above`
    in flight the server refuses at once (a 429), and the request goes again after `backoff`
    (the backend's retry). Simulated time only."""

    def __init__(self, limiter: AdaptiveLimit | None, clock: Clock, fixed: int = 64) -> None:
        self.limiter, self.clock, self.fixed = limiter, clock, fixed
        self.limits: list[int] = []  # the limit after each answer or refusal
        self.refused: list[bool] = []  # per request sent, in sending order: refused?

    def run(self, n: int, latency: Latency, refuse_above: int = 0, backoff: float = 0.5) -> float:
        start, lim = self.clock.now, self.limiter
        out: list[tuple[float, int, float, int, int]] = []  # (done at, seq, sent at, request, in flight at send or -1)
        todo: list[tuple[float, int]] = []  # refused requests: (when they may go again, request)
        next_new, in_flight, done, seq = 0, 0, 0, 0
        while done < n:
            while in_flight < (lim.limit if lim else self.fixed) and ((todo and todo[0][0] <= self.clock.now) or next_new < n):
                if todo and todo[0][0] <= self.clock.now:
                    j = heapq.heappop(todo)[1]
                else:
                    j, next_new = next_new, next_new + 1
                in_flight += 1
                refused = bool(refuse_above) and in_flight > refuse_above
                self.refused.append(refused)
                took = 0.001 if refused else latency(j, in_flight)
                heapq.heappush(out, (self.clock.now + took, seq, self.clock.now, j, -1 if refused else in_flight))
                seq += 1
            if not out:  # only refused requests are left, backing off
                self.clock.now = todo[0][0]
                continue
            at, _, sent, j, load = heapq.heappop(out)
            self.clock.now = at
            in_flight -= 1
            if load < 0:
                heapq.heappush(todo, (at + backoff, j))
                if lim:
                    lim.on_drop(sent)
            else:
                done += 1
                if lim:
                    lim.on_answer(sent, at - sent, load)
            self.limits.append(lim.limit if lim else self.fixed)
        return self.clock.now - start


def against_fixed(n: int, latency: Callable[[random.Random], Latency], seed: int = 1) -> tuple[float, Loop]:
    """The adaptive run's time over a fixed 64's, on the same requests; and the adaptive loop."""
    adaptive = Loop(AdaptiveLimit(1, 64, clock=(clock := Clock())), clock)
    took = adaptive.run(n, latency(random.Random(seed)))
    fixed = Loop(None, Clock()).run(n, latency(random.Random(seed)))
    return took / fixed, adaptive


def test_longer_answers_are_not_a_queue_the_limit_stays_where_it_was() -> None:
    # The reviewer's case: a server that never queues, 600 short prompts (50 ms), then 600
    # long ones (1 s). The old rule read the longer replies as queueing: 64 → 1, 16× the time.
    ratio, loop = against_fixed(1200, lambda rng: lambda i, n: 0.05 if i < 600 else 1.0)
    assert ratio < 1.1
    assert min(loop.limits[700:]) >= 48


def test_a_replay_of_short_then_long_requests_in_round_trips() -> None:
    """/tmp/r16/grad.py's replay: 300 answers of 50 ms, then 2000 of 2 s, each round trip as
    many answers as the limit; at 64 throughout the long phase takes 62.5 s (the old rule: 440)."""
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)

    def phase(latency: float, n: int) -> list[int]:
        trace, done = [], 0
        while done < n:
            now, sent = limit.limit, clock.now
            clock.now += latency
            for _ in range(now):
                limit.on_answer(sent, latency, now)
            done += now
            trace.append(now)
        return trace

    phase(0.05, 300)
    long = phase(2.0, 2000)
    assert 2.0 * len(long) <= 1.1 * 62.5
    assert min(long) >= 48


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_mix_of_short_and_long_prompts_is_not_a_queue(seed: int) -> None:
    ratio, loop = against_fixed(3000, lambda rng: lambda i, n: rng.choice((0.05, 1.0)), seed)
    assert ratio < 1.25
    assert sorted(loop.limits[1000:])[len(loop.limits[1000:]) // 10] >= 40  # 90 % of the time


def test_a_server_that_queues_above_16_is_kept_near_twice_its_latency() -> None:
    rng = random.Random(4)

    def queueing(i: int, n: int) -> float:  # 50 ms up to 16 at once, then in proportion: a queue
        return 0.05 * max(1.0, n / 16) * rng.uniform(0.9, 1.1)

    loop = Loop(AdaptiveLimit(1, 64, clock=(clock := Clock())), clock)
    took = loop.run(3000, queueing)
    later = loop.limits[1000:]
    assert 16 <= min(later) and max(later) <= 2 * 16 * 1.1 + 2  # latency within about TOLERANCE of 50 ms
    assert took <= 1.1 * 3000 * 0.05 / 16  # and the server kept busy: within 10 % of its floor


def test_a_server_that_refuses_above_16_is_found_and_then_rarely_refuses() -> None:
    rng = random.Random(5)
    loop = Loop(AdaptiveLimit(1, 64, clock=(clock := Clock())), clock)
    loop.run(2000, lambda i, n: rng.uniform(0.045, 0.055), refuse_above=16)
    later = loop.refused[len(loop.refused) // 4:]
    assert sum(later) / len(later) < 0.05
    assert max(loop.limits[len(loop.limits) // 4:]) <= 20


def at_load(limit: AdaptiveLimit, clock: Clock, n: int, latency: float, load: int) -> None:
    """`n` answers of `latency`, each sent with `load` requests out."""
    for _ in range(n):
        sent = clock.now
        clock.now += latency / load
        limit.on_answer(sent, latency, load)


def test_a_cut_on_latency_that_turns_out_to_be_the_work_is_undone() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    at_load(limit, clock, 200, 0.05, 32)  # 32 at once answered in 50 ms
    assert limit.limit == 64
    at_load(limit, clock, 128, 0.11, 64)  # twice as many, and above twice the latency: a queue of ours
    assert limit.limit < 64
    at_load(limit, clock, 64, 1.0, limit.limit)  # then far more than any queue of ours: the work changed
    assert limit.limit == 64


def test_drops_are_never_undone() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    answers(limit, clock, 200, latency=0.05)
    clock.now += 1
    limit.on_drop(clock.now)
    cut = limit.value
    answers(limit, clock, 64, latency=1.0)  # the work changed meanwhile: the floor is learnt anew
    assert cut < limit.value < cut + 2  # the 429's cut stays (growth by one a round trip, as after any drop)


def test_the_first_answers_are_too_few_to_judge_latency() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    for latency in [0.001] + [0.05] * (ROUND - 1):  # one lucky answer first is not the floor
        sent = clock.now
        clock.now += latency
        limit.on_answer(sent, latency, limit.limit)
    assert limit.limit == ROUND + 1
    answers(limit, clock, 40, latency=0.05)
    assert limit.limit > ROUND + 1
