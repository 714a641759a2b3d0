"""Token pacing (tokens_per_minute): the bucket's schedule on an injected clock, the estimate a
request is charged before it is sent, and the correction by the usage the server reports."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from test_backends import FakeClock

from evaltui.backends import make_backend, make_client
from evaltui.backends.pacing import TokenBudget, estimate_tokens
from evaltui.plan import ModelConfig
from evaltui.sim import Faults, SimConfig


def together(n: int, request: Callable[[], Awaitable[None]]) -> None:
    """`n` callers of `request` at once, to the end."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(request)

    anyio.run(main)


def test_the_tokens_a_request_used_are_paid_off_at_the_budgets_rate() -> None:
    clock = FakeClock()
    budget = TokenBudget(6000.0, clock=clock, sleep=clock.sleep, ahead=0.0)  # 100 tokens a second

    async def main() -> list[float]:
        grants = []
        for used in (300, 100, 50):
            await budget.acquire(used)
            grants.append(clock.now)
            budget.settle(used, used)
        return grants

    assert anyio.run(main) == [1000.0, pytest.approx(1003.0), pytest.approx(1004.0)]


def test_concurrent_callers_together_keep_the_token_rate() -> None:
    clock = FakeClock()
    budget = TokenBudget(1000.0, clock=clock, sleep=clock.sleep, ahead=0.0)
    grants: list[float] = []

    async def take() -> None:
        await budget.acquire(100)
        grants.append(clock.now)
        budget.settle(100, 100)

    together(30, take)
    assert len(grants) == 30
    assert max(grants) - min(grants) == pytest.approx(29 * 6.0)  # 100 tokens every 6 s, however many ask
    assert sum(1 for t in grants if t < min(grants) + 60.0) == 10  # 1,000 tokens in any minute


def test_a_charge_is_settled_by_what_the_server_counted_and_idle_credit_is_not_kept() -> None:
    clock = FakeClock()
    budget = TokenBudget(600.0, clock=clock, sleep=clock.sleep, ahead=0.0)  # 10 tokens a second

    async def main() -> list[float]:
        await budget.acquire(100)  # charged 100, the server counted 40
        budget.settle(100, 40)
        await budget.acquire(10)
        first = clock.now
        budget.settle(10, 60)  # charged 10, the server counted 60
        await budget.acquire(1)
        second = clock.now
        budget.settle(1, 0)  # it generated nothing: nothing to pay
        clock.now += 100.0  # idle
        await budget.acquire(10)
        budget.settle(10, 10)
        await budget.acquire(10)
        return [first - 1000.0, second - 1000.0, clock.now - second]

    assert anyio.run(main) == pytest.approx([4.0, 10.0, 101.0])  # 40 then 60 tokens at 10/s; no burst after the idle stretch


def test_a_settlement_reaches_the_callers_already_waiting() -> None:
    # Charged 500 each, the server counts 10: the waiting callers go as soon as the one in
    # flight settles, not when 500 tokens would have been paid off.
    clock = FakeClock()
    budget = TokenBudget(6000.0, clock=clock, sleep=clock.sleep, ahead=0.0)  # 100 tokens a second
    grants: list[float] = []

    async def request() -> None:
        await budget.acquire(500)
        grants.append(clock.now)
        await anyio.sleep(0)  # the reply comes back
        budget.settle(500, 10)

    together(10, request)
    assert len(grants) == 10
    assert max(grants) - 1000.0 == pytest.approx(9 * 0.1)  # 10 tokens each at 100 a second, not 500


def test_the_estimates_in_flight_fit_ahead_seconds_of_the_budget() -> None:
    clock = FakeClock()
    budget = TokenBudget(600.0, clock=clock, sleep=clock.sleep, ahead=2.0)  # 10 tokens a second: 20 in flight
    third_at: list[float] = []

    async def third() -> None:
        await budget.acquire(10)
        third_at.append(clock.now)

    async def main() -> None:
        await budget.acquire(10)
        await budget.acquire(10)  # two at once: 20 tokens in flight
        async with anyio.create_task_group() as tg:
            tg.start_soon(third)
            for _ in range(5):
                await anyio.sleep(0)
            assert not third_at and clock.now == 1000.0  # waits for room, however long
            budget.settle(10, 10)  # one answered: room, and 10 tokens to pay off (1 s)

    anyio.run(main)
    assert third_at == [pytest.approx(1001.0)]


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
    bucket = TokenBudget(model.tokens_per_minute, clock=clock, sleep=clock.sleep, ahead=0.0)
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
    bucket = TokenBudget(model.tokens_per_minute, clock=clock, sleep=clock.sleep, ahead=0.0)

    async def main() -> int:
        async with make_client(model) as client:
            backend = make_backend(model, client, tokens=bucket)
            await backend.generate("hello there")
            await bucket.acquire(0)
            return backend.tokens_used

    used = anyio.run(main)
    assert sim.stats.requests_total == 3
    assert clock.now - 1000.0 == pytest.approx(used * bucket.interval)  # only the answered attempt's tokens
