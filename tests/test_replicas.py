"""A model served by several replicas, at the backend: routing, caps, ejection and probing,
re-sends that cost no retry, and every replica down — against real simulators on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from yarl import URL

from evaltui.backends import Backend, BackendError, make_backend, make_client
from evaltui.backends.replicas import EJECT_AFTER, EJECTED, UP, Replica, Router
from evaltui.plan import ModelConfig
from evaltui.sim import AnswerKey, ModelProfile, SimConfig, SimThread

N = 24


def prompts(n: int = N) -> list[str]:
    return [f"Q{i}: what is {i} + 1?" for i in range(n)]


def key() -> AnswerKey:
    k = AnswerKey()
    for i, p in enumerate(prompts(200)):
        k.add_gen(p, str(i + 1))
    return k


def model(urls: list[str], **kw: Any) -> ModelConfig:
    data = {"abbr": "m", "type": "lightllm", "url": urls, "retry": 1, "backoff": 0.0, "timeout": 10.0, "max_workers": 8, "down_timeout": 5.0}
    return ModelConfig.model_validate({**data, **kw})


def urls_of(*sims: SimThread) -> list[str]:
    return [f"{s.url}/m/generate" for s in sims]


def run(cfg: ModelConfig, fn: Callable[[Backend], Awaitable[Any]], *, probes: bool = False, limit: float = 60.0) -> Any:
    """`fn(backend)` with a fresh client (and the prober beside it, as the worker pool runs it)."""

    async def main() -> Any:
        with anyio.fail_after(limit):
            async with make_client(cfg) as client:
                backend = make_backend(cfg, client)
                async with anyio.create_task_group() as tg:
                    if probes:
                        tg.start_soon(backend.router.run_probes)
                    result = await fn(backend)
                    tg.cancel_scope.cancel()
                return result

    return anyio.run(main)


async def gather(backend: Backend, items: list[str], width: int = 8) -> list[str | BackendError]:
    """Generate every prompt, `width` at a time, in order; a failure is kept as its error."""
    out: list[str | BackendError] = [""] * len(items)
    limiter = anyio.Semaphore(width)

    async def one(i: int) -> None:
        async with limiter:
            try:
                out[i] = await backend.generate(items[i])
            except BackendError as e:
                out[i] = e

    async with anyio.create_task_group() as tg:
        for i in range(len(items)):
            tg.start_soon(one, i)
    return out


def right(results: list[Any], n: int = N) -> bool:
    return results == [str(i + 1) for i in range(n)]


def test_requests_go_to_the_replica_with_the_fewest_in_flight(sim_factory) -> None:
    slow = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.2)))
    fast = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.005)))
    results = run(model(urls_of(slow, fast)), lambda b: gather(b, prompts(60), width=6))
    assert right(results, 60)
    assert fast.stats.requests_total > 4 * slow.stats.requests_total  # the slow one keeps its few busy


def test_ties_take_turns(sim_factory) -> None:
    a, b = (sim_factory(SimConfig(answer_key=key())) for _ in range(2))
    results = run(model(urls_of(a, b)), lambda be: gather(be, prompts(10), width=1))
    assert right(results, 10)
    assert a.stats.requests_total == b.stats.requests_total == 5


def test_max_workers_per_url_caps_each_replica(sim_factory) -> None:
    a, b = (sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.05))) for _ in range(2))
    results = run(model(urls_of(a, b), max_workers=16, max_workers_per_url=3), lambda be: gather(be, prompts(), width=16))
    assert right(results)
    assert a.stats.max_in_flight == b.stats.max_in_flight == 3


def test_a_replica_that_dies_is_ejected_and_its_requests_go_elsewhere_without_costing_retries(sim_factory) -> None:
    # The slow one holds four requests when it is killed: the first two failures cost their
    # requests a retry, the third in a row ejects it, and the fourth is sent again for free.
    dying = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=30.0)))
    other = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.02)))
    seen: list[tuple[str, str]] = []

    async def go(b: Backend) -> tuple[list[Any], int]:
        b.router.on_change = lambda r: seen.append((r.url, r.state))
        out: list[Any] = []

        async def kill() -> None:
            while dying.stats.in_flight < 4:
                await anyio.sleep(0.01)
            await anyio.to_thread.run_sync(dying.stop)

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill)
            out = await gather(b, prompts(40))
        return out, b.retries

    results, retries = run(model(urls_of(dying, other), retry=1), go)
    assert right(results, 40)  # retry = 1, yet no request failed
    assert retries == EJECT_AFTER - 1  # only the failures before the ejection cost a retry
    assert seen == [(urls_of(dying)[0], EJECTED)]
    assert other.stats.requests_total == 40


def test_an_ejected_replica_is_probed_and_comes_back(sim_factory) -> None:
    dying = sim_factory(SimConfig(answer_key=key(), die_after=2))
    other = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.02)))
    states: list[str] = []

    async def go(b: Backend) -> list[Any]:
        b.router.on_change = lambda r: states.append(r.state) if r.url == urls_of(dying)[0] else None
        first = await gather(b, prompts())
        assert b.router.replicas[0].state == EJECTED
        SimThread(SimConfig(answer_key=key(), port=dying.port)).start()  # back on its port (stopped with the process)
        with anyio.fail_after(20):
            while b.router.replicas[0].state != UP:
                await anyio.sleep(0.05)
        return first + await gather(b, prompts(N * 2)[N:], width=2)

    results = run(model(urls_of(dying, other)), go, probes=True)
    assert results == [str(i + 1) for i in range(2 * N)]
    assert states[:3] == [EJECTED, "probing", UP] or states[:5] == [EJECTED, "probing", EJECTED, "probing", UP]


def test_every_replica_down_past_down_timeout_fails_the_requests_with_the_reason(sim_factory) -> None:
    a, b = (sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.02), die_after=3)) for _ in range(2))
    downs: list[str] = []

    async def go(be: Backend) -> list[Any]:
        be.router.on_down = downs.append
        return await gather(be, prompts(12), width=4)

    results = run(model(urls_of(a, b), down_timeout=0.5, retry=2 * (EJECT_AFTER - 1)), go, probes=True)  # none fails before both are out
    failed = [r for r in results if isinstance(r, BackendError)]
    assert failed and all(e.kind == "down" for e in failed)
    assert "every replica was down for 0.5 s" in failed[0].message and a.url in failed[0].message and b.url in failed[0].message
    assert len(downs) == 1 and a.url in downs[0]
    assert all(r == str(i + 1) for i, r in enumerate(results) if not isinstance(r, BackendError))


def test_a_request_waits_while_every_replica_is_down_and_goes_on_when_one_is_back(sim_factory) -> None:
    a, b = (sim_factory(SimConfig(answer_key=key(), die_after=2)) for _ in range(2))
    downs: list[str] = []

    async def go(be: Backend) -> tuple[list[Any], int]:
        be.router.on_down = downs.append

        async def restart() -> None:
            while not downs:
                await anyio.sleep(0.02)
            await anyio.sleep(0.3)
            SimThread(SimConfig(answer_key=key(), port=a.port)).start()

        async with anyio.create_task_group() as tg:
            tg.start_soon(restart)
            results = await gather(be, prompts(8), width=1)  # both die on their third request
        return results, be.retries

    results, retries = run(model(urls_of(a, b), retry=2 * EJECT_AFTER), go, probes=True)
    assert right(results, 8) and len(downs) == 1
    assert retries == 2 * (EJECT_AFTER - 1)  # the wait itself cost none


def test_one_url_is_never_ejected(sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=key(), die_after=2))

    async def go(be: Backend) -> tuple[list[Any], str]:
        return await gather(be, prompts(6), width=1), be.router.replicas[0].state

    results, state = run(model(urls_of(sim)[0:1]), go)
    # the third is cut, the later ones refused (or cut, if they come while it is still closing)
    assert results[:2] == ["1", "2"] and all(isinstance(r, BackendError) and r.kind in ("connect", "connection") for r in results[2:])
    assert state == UP


def test_the_answering_replica_is_known_after_each_request(sim_factory) -> None:
    a, b = (sim_factory(SimConfig(answer_key=key())) for _ in range(2))

    async def go(be: Backend) -> list[str]:
        seen = []
        for p in prompts(4):
            await be.generate(p)
            seen.append(be.answered_by())
        return seen

    assert run(model(urls_of(a, b)), go) == [urls_of(a)[0], urls_of(b)[0]] * 2


@pytest.mark.parametrize(("type", "url", "health"), [
    ("lightllm", "http://h:1/generate", "http://h:1/health"),
    ("lightllm", "http://h:1/m/generate", "http://h:1/m/health"),
    ("openai-chat", "http://h:1/v1", "http://h:1/v1/models"),
    ("openai-completions", "http://h:1/x/v1/completions?api-version=1", "http://h:1/x/v1/models?api-version=1"),
    ("lightllm-chat", "http://h:1/v1", "http://h:1/health"),
])
def test_each_protocol_probes_the_health_check_its_servers_have(type: str, url: str, health: str) -> None:
    cfg = ModelConfig.model_validate({"abbr": "m", "type": type, "url": [url, "http://other:2/v1"], "model": "x"})

    async def main() -> str:
        async with make_client(cfg) as client:
            return str(make_backend(cfg, client).router.replicas[0].health)

    assert anyio.run(main) == health


# ------------------------------------------------------------------------------ the router alone


def router(n: int, cap: int) -> Router:
    async def healthy(r: Replica) -> str | None:
        return None

    return Router([Replica(i, f"http://r{i}", URL(f"http://r{i}/generate"), URL(f"http://r{i}/health"), cap, None) for i in range(n)], down_timeout=5.0, probe=healthy)


def test_a_freed_slot_goes_to_the_oldest_waiter_and_a_cancelled_one_leaks_nothing() -> None:
    async def main() -> list[str]:
        rt = router(2, 1)
        first, second = await rt.acquire(), await rt.acquire()
        got: list[str] = []

        async def waiter(name: str) -> None:
            r = await rt.acquire()
            got.append(f"{name}@{r.url}")

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter, "a")
            await anyio.sleep(0.01)
            with anyio.CancelScope() as gone:
                gone.cancel()
                await rt.acquire()  # cancelled while it waits: takes nothing
            tg.start_soon(waiter, "b")
            await anyio.sleep(0.01)
            rt.release(second, 0, 0.0, 200)
            await anyio.sleep(0.01)
            rt.release(first, 0, 0.0, 200)
        assert rt.in_flight == 2 and not rt._waiters
        return got

    assert anyio.run(main) == ["a@http://r1", "b@http://r0"]
