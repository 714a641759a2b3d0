"""Token pacing (tokens_per_minute): the bucket's schedule on an injected clock, the estimate a
request is charged before it is sent, and the correction by the usage the server reports."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from evaltui.backends import TokenBucket, make_backend, make_client
from evaltui.backends.base import estimate_tokens
from evaltui.plan import ModelConfig
from evaltui.sim import Faults, SimConfig


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        deadline = self.now + seconds
        await anyio.sleep(0)
        self.now = max(self.now, deadline)


def test_a_request_takes_cost_over_rate_seconds_of_the_schedule() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=100.0, clock=clock, sleep=clock.sleep)  # 6,000 tokens a minute

    async def main() -> list[float]:
        grants = []
        for cost in (300, 100, 50):
            await bucket.acquire(cost)
            grants.append(clock.now)
        return grants

    assert anyio.run(main) == [1000.0, pytest.approx(1003.0), pytest.approx(1004.0)]


def test_concurrent_callers_together_keep_the_token_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=1000.0 / 60, clock=clock, sleep=clock.sleep)  # 1,000 tokens a minute
    grants: list[float] = []

    async def take() -> None:
        await bucket.acquire(100)
        grants.append(clock.now)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(30):
                tg.start_soon(take)

    anyio.run(main)
    assert len(grants) == 30
    assert max(grants) - min(grants) == pytest.approx(29 * 6.0)  # 100 tokens every 6 s, however many ask
    assert sum(1 for t in grants if t < min(grants) + 60.0) == 10  # 1,000 tokens in any minute


def test_adjust_moves_the_schedule_by_what_the_server_counted() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=10.0, clock=clock, sleep=clock.sleep)

    async def main() -> list[float]:
        await bucket.acquire(100)  # charged 100, the server counted 40
        bucket.adjust(40 - 100)
        await bucket.acquire(10)
        first = clock.now
        bucket.adjust(+50)  # the next one charged 10, the server counted 60
        await bucket.acquire(1)
        return [first, clock.now]

    first, second = anyio.run(main)
    assert first == pytest.approx(1004.0)  # 40 tokens at 10/s, not 100
    assert second == pytest.approx(1004.0 + 6.0)  # 60 tokens at 10/s
    bucket.adjust(-10_000)  # credit before now is lost: no burst afterwards

    async def two() -> float:
        await bucket.acquire(10)
        await bucket.acquire(10)
        return clock.now

    start = clock.now
    assert anyio.run(two) == pytest.approx(start + 1.0)


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("abcd", 1), ("abcde", 2), ("x" * 400, 100), ("数学题", 3)])
def test_the_estimate_is_utf8_bytes_over_four_rounded_up(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def cfg(url: str, type: str = "openai-chat", **kw: Any) -> ModelConfig:
    data: dict[str, Any] = {"abbr": "m", "type": type, "url": url, "retry": 2, "backoff": 0.0, "timeout": 10.0,
                            "tokens_per_minute": 60_000.0, "generation_kwargs": {"max_new_tokens": 100}}
    if type != "lightllm":
        data["model"] = "m"
    return ModelConfig.model_validate({**data, **kw})


@pytest.mark.parametrize("type", ["openai-chat", "lightllm", "openai-completions"])
def test_a_request_is_charged_its_estimate_then_the_usage_the_server_reports(sim_factory, type: str) -> None:
    sim = sim_factory(SimConfig())
    url = f"{sim.url}/generate" if type == "lightllm" else f"{sim.url}/v1"
    model = cfg(url, type)
    clock = FakeClock()
    bucket = TokenBucket(model.tokens_per_minute / 60, clock=clock, sleep=clock.sleep)
    prompt = "Question: what is two plus two, in words?"

    async def main() -> tuple[int, int]:
        async with make_client(model) as client:
            backend = make_backend(model, client, tokens=bucket)
            assert backend.cost(prompt) == estimate_tokens(prompt) + 100
            await backend.generate(prompt)
            await backend.generate(prompt)  # waits out what the first one used, as the server counted it
            return backend.tokens_used, bucket.interval

    used, interval = anyio.run(main)
    assert used == sim.stats.tokens > 0  # the server's own count, not the estimate
    assert clock.now - 1000.0 == pytest.approx(used / 2 * interval)


def test_failed_attempts_give_their_tokens_back(sim_factory) -> None:
    sim = sim_factory(SimConfig(faults=Faults(fail_first=2, fail_first_kind="500")))
    model = cfg(f"{sim.url}/v1")
    clock = FakeClock()
    bucket = TokenBucket(model.tokens_per_minute / 60, clock=clock, sleep=clock.sleep)

    async def main() -> int:
        async with make_client(model) as client:
            backend = make_backend(model, client, tokens=bucket)
            await backend.generate("hello there")
            await backend.tokens.acquire(0)  # type: ignore[union-attr]
            return backend.tokens_used

    used = anyio.run(main)
    assert sim.stats.requests_total == 3
    assert clock.now - 1000.0 == pytest.approx(used * bucket.interval)  # only the answered attempt's tokens
