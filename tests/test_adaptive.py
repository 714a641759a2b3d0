"""The adaptive concurrency limit (a slow start, then probes that find the knee; drops cut it),
replayed on an injected clock: answer by answer, and as a closed loop against model servers
(one whose latency does not depend on load, one that queues, one that refuses, one that serves
K requests at a time and keeps the rest in line), where what counts is the run's time against
the best fixed setting and what the server had to queue or refuse."""

from __future__ import annotations

import heapq
import random
import statistics
from collections.abc import Callable

import pytest

from evaltui.backends.adaptive import BACKOFF, BASE_N, QUEUED, AdaptiveLimit


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
    answers(limit, clock, 30, latency=0.05 * (QUEUED - 0.5))
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
    (the backend's retry). Simulated time only. The limiter is told of each send (its probe
    windows are counted so) and given back the tag it said."""

    def __init__(self, limiter: AdaptiveLimit | None, clock: Clock, fixed: int = 64) -> None:
        self.limiter, self.clock, self.fixed = limiter, clock, fixed
        self.limits: list[int] = []  # the limit after each answer or refusal (a probe's lower load included)
        self.held: list[int] = []  # the limit it holds between probes, likewise
        self.refused: list[bool] = []  # per request sent, in sending order: refused?

    def run(self, n: int, latency: Latency, refuse_above: int = 0, backoff: float = 0.5) -> float:
        start, lim = self.clock.now, self.limiter
        out: list[tuple[float, int, float, int, int, int]] = []  # (done at, seq, sent at, request, in flight at send or -1, tag)
        todo: list[tuple[float, int]] = []  # refused requests: (when they may go again, request)
        next_new, in_flight, done, seq = 0, 0, 0, 0
        while done < n:
            while in_flight < (lim.limit if lim else self.fixed) and ((todo and todo[0][0] <= self.clock.now) or next_new < n):
                if todo and todo[0][0] <= self.clock.now:
                    j = heapq.heappop(todo)[1]
                else:
                    j, next_new = next_new, next_new + 1
                in_flight += 1
                tag = lim.on_send() if lim else 0
                refused = bool(refuse_above) and in_flight > refuse_above
                self.refused.append(refused)
                took = 0.001 if refused else latency(j, in_flight)
                heapq.heappush(out, (self.clock.now + took, seq, self.clock.now, j, -1 if refused else in_flight, tag))
                seq += 1
            if not out:  # only refused requests are left, backing off
                self.clock.now = todo[0][0]
                continue
            at, _, sent, j, load, tag = heapq.heappop(out)
            self.clock.now = at
            in_flight -= 1
            if load < 0:
                heapq.heappush(todo, (at + backoff, j))
                if lim:
                    lim.on_drop(sent, tag)
            else:
                done += 1
                if lim:
                    lim.on_answer(sent, at - sent, load, tag)
            self.limits.append(lim.limit if lim else self.fixed)
            self.held.append(int(lim.value) if lim else self.fixed)
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
    assert min(loop.held[700:]) >= 48


def test_short_then_long_requests_in_a_closed_loop_cost_no_more_than_a_fixed_64() -> None:
    """/tmp/r16/grad.py's case: 300 answers of 50 ms, then 2000 of 2 s from a server that never
    queues; at 64 throughout the long phase takes 62.5 s (the rule before last: 440)."""
    ratio, loop = against_fixed(2300, lambda rng: lambda i, n: 0.05 if i < 300 else 2.0)
    assert ratio < 1.1
    assert sorted(loop.held[400:])[len(loop.held[400:]) // 20] >= 48  # 95 % of the time


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_mix_of_short_and_long_prompts_is_not_a_queue(seed: int) -> None:
    ratio, loop = against_fixed(3000, lambda rng: lambda i, n: rng.choice((0.05, 1.0)), seed)
    assert ratio < 1.25
    assert sorted(loop.held[1000:])[len(loop.held[1000:]) // 10] >= 40  # 90 % of the time


def test_a_server_that_queues_above_16_is_kept_near_twice_its_latency() -> None:
    rng = random.Random(4)

    def queueing(i: int, n: int) -> float:  # 50 ms up to 16 at once, then in proportion: a queue
        return 0.05 * max(1.0, n / 16) * rng.uniform(0.9, 1.1)

    loop = Loop(AdaptiveLimit(1, 64, clock=(clock := Clock())), clock)
    took = loop.run(3000, queueing)
    later = loop.held[1000:]  # (a probe's lower load, a few round trips in a while, goes below it)
    assert 16 <= min(later) and max(later) <= 2 * 16 * 1.1 + 2  # latency within about 2 x 50 ms
    assert took <= 1.1 * 3000 * 0.05 / 16  # and the server kept busy: within 10 % of its floor


def test_a_server_that_refuses_above_16_is_found_and_then_rarely_refuses() -> None:
    rng = random.Random(5)
    loop = Loop(AdaptiveLimit(1, 64, clock=(clock := Clock())), clock)
    loop.run(2000, lambda i, n: rng.uniform(0.045, 0.055), refuse_above=16)
    later = loop.refused[len(loop.refused) // 4:]
    assert sum(later) / len(later) < 0.05
    assert max(loop.limits[len(loop.limits) // 4:]) <= 20


def test_the_first_answers_are_too_few_to_judge_latency() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    for latency in [0.001] + [0.05] * (BASE_N - 1):  # one lucky answer first is not the base
        sent = clock.now
        clock.now += latency
        limit.on_answer(sent, latency, limit.limit)
    assert limit.limit == BASE_N + 1
    answers(limit, clock, 40, latency=0.05)
    assert limit.limit > BASE_N + 1


# ----------------------------------------------------------- a server that serves K at a time

Service = Callable[[random.Random], float]


def in_line(limiter: AdaptiveLimit | None, k: int, n: int, service: Service, *, fixed: int = 0, seed: int = 1,
            overhead: float = 0.001) -> tuple[float, float, list[int]]:
    """`n` requests through `limiter` (or a fixed `fixed`) to a server that works on `k` at a
    time and keeps the rest in line, first come first served (llama.cpp with k slots); each takes
    `service` of its slot, plus `overhead` on the wire. Returns (seconds, median latency, the
    limit held after each answer). Simulated time only."""
    rng, clock = random.Random(seed), limiter._clock if limiter is not None else Clock()  # noqa: SLF001
    start = clock()
    events: list[tuple[float, int, str, tuple[float, int, int]]] = []
    line: list[tuple[float, int, int]] = []
    busy = in_flight = sent = done = seq = 0
    latencies: list[float] = []
    held: list[int] = []

    def at(t: float, what: str, req: tuple[float, int, int]) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, what, req))
        seq += 1

    def send() -> None:
        nonlocal in_flight, sent
        while in_flight < (limiter.limit if limiter else fixed) and sent < n:
            in_flight, sent = in_flight + 1, sent + 1
            tag = limiter.on_send() if limiter else 0
            at(clock() + overhead / 2, "arrive", (clock(), in_flight, tag))

    assert isinstance(clock, Clock)
    send()
    while done < n:
        t, _, what, req = heapq.heappop(events)
        clock.now = t
        if what == "arrive":
            if busy < k:
                busy += 1
                at(t + service(rng), "served", req)
            else:
                line.append(req)
        elif what == "served":
            if line:
                at(t + service(rng), "served", line.pop(0))
            else:
                busy -= 1
            at(t + overhead / 2, "answer", req)
        else:
            sent_at, load, tag = req
            in_flight, done = in_flight - 1, done + 1
            latencies.append(t - sent_at)
            if limiter:
                limiter.on_answer(sent_at, t - sent_at, load, tag)
                held.append(int(limiter.value))
            send()
    return clock() - start, statistics.median(latencies), held


def best_fixed(k: int, n: int, service: Service, seed: int) -> tuple[float, float]:
    """The best fixed setting's (seconds, median latency): the fastest, and among those within 2 %
    of it the one with the lowest median latency (the knee)."""
    runs = [in_line(None, k, n, service, fixed=f, seed=seed)[:2] for f in sorted({1, 2, 3, 4, k, k + 1, k + 2, 2 * k, 32, 64})]
    fastest = min(took for took, _ in runs)
    return fastest, min(p50 for took, p50 in runs if took <= 1.02 * fastest)


@pytest.mark.parametrize("k", [1, 8])
@pytest.mark.parametrize("jitter", [0.1, 0.5])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_server_that_serves_k_at_a_time_is_held_near_its_knee(k: int, jitter: float, seed: int) -> None:
    """Issue 23: against a real llama.cpp serving one request at a time the limit wandered 64 →
    17–52, latency ~16× a fixed 4's for no more throughput. Here the server serves `k` at a time
    (32 ms each, ± `jitter`): within 10 % of the best fixed setting's throughput, its median
    latency at most 2× the best's, and the limit held between probes at most 2.5k + 1 nine tenths
    of the time once found (a probe that sees no queue lets it double, and probes it there)."""
    service: Service = lambda rng: 0.032 * rng.uniform(1 - jitter, 1 + jitter)  # noqa: E731
    clock = Clock()
    took, p50, held = in_line(AdaptiveLimit(1, 64, clock=clock), k, 2000, service, seed=seed)
    fastest, best_p50 = best_fixed(k, 2000, service, seed)
    assert took <= 1.1 * fastest, (took, fastest)
    assert p50 <= 2.0 * best_p50, (p50, best_p50)
    later = sorted(held[len(held) // 2:])
    assert later[len(later) * 9 // 10] <= 2.5 * k + 1 and later[0] >= 1


@pytest.mark.parametrize("k", [1, 8])
def test_a_server_of_heavy_tailed_service_times_is_never_starved(k: int) -> None:
    """Exponential service times make the probes' windows noisy: the limit then sits above the
    knee more than it must, but its throughput stays near the best fixed setting's."""
    service: Service = lambda rng: rng.expovariate(1 / 0.032)  # noqa: E731
    took, _, _ = in_line(AdaptiveLimit(1, 64, clock=Clock()), k, 2000, service, seed=3)
    fastest, _ = best_fixed(k, 2000, service, 3)
    assert took <= 1.15 * fastest, (took, fastest)


def test_a_server_that_gets_more_slots_midway_is_followed() -> None:
    """One slot for the first 1,000 requests, eight after (another instance behind the same
    url, a batch that grew): the limit leaves the first knee and finds the second."""
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    _, _, held = in_line(limit, 1, 1000, lambda rng: 0.032, seed=4)
    assert max(held[500:]) <= 3
    _, _, held = in_line(limit, 8, 3000, lambda rng: 0.032, seed=5)
    later = held[1500:]
    assert 8 <= statistics.median(later) <= 17
