"""The adaptive concurrency limit (AIMD with a latency gradient), replayed on an injected clock."""

from __future__ import annotations

import pytest

from evaltui.backends.adaptive import BACKOFF, MIN_WINDOW, TOLERANCE, AdaptiveLimit


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


def test_latency_above_tolerance_times_its_running_minimum_decreases_the_limit() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    answers(limit, clock, 40, latency=0.05)  # no queue: the floor is 50 ms
    high = limit.value
    answers(limit, clock, 40, latency=0.05 * (TOLERANCE + 1))  # the server queues
    assert limit.value < high * BACKOFF  # decreased, more than once over those round trips
    low = limit.value
    answers(limit, clock, 80, latency=0.05)  # the queue drained
    assert limit.value > low


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


def test_the_running_minimum_forgets_an_old_floor_so_a_slower_dataset_is_learnt() -> None:
    clock = Clock()
    limit = AdaptiveLimit(1, 64, clock=clock)
    answers(limit, clock, MIN_WINDOW, latency=0.01)
    answers(limit, clock, 3 * MIN_WINDOW, latency=0.1)  # ten times slower for good: decreases, then learns it
    settled = limit.value
    answers(limit, clock, MIN_WINDOW, latency=0.1)
    assert limit.value > settled  # growing again: 0.1 s is the new floor
