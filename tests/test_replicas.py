"""A model served by several replicas, at the backend: routing, caps, ejection and probing,
re-sends that cost no retry, and every replica down — against real simulators on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from aiohttp import web
from hostile import LoopbackServer
from test_backends import FakeClock
from yarl import URL

from evaltui.backends import Backend, BackendError, make_backend, make_client
from evaltui.backends import replicas as rs
from evaltui.backends.replica import EJECT_AFTER, EJECTED, NO_REPLY, UP, Replica
from evaltui.backends.replicas import Router
from evaltui.backends.trace import Trace
from evaltui.plan import ModelConfig
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig, SimThread

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


@pytest.mark.reliability
def test_a_replica_that_dies_is_ejected_and_its_requests_go_elsewhere_without_costing_retries(sim_factory) -> None:
    # The slow one holds four requests when it is killed: each is cut (or refused when sent
    # again), which says nothing about the request, so each goes to the other for free — the
    # ones before the ejection too. With retry = 0, none fails.
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

    results, retries = run(model(urls_of(dying, other), retry=0), go)
    assert right(results, 40)  # retry = 0, yet no request failed
    assert retries == 0
    assert seen == [(urls_of(dying)[0], EJECTED)]
    assert other.stats.requests_total == 40


def test_a_dead_replica_listed_first_costs_no_request_with_retry_0(sim_factory) -> None:
    dead = sim_factory(SimConfig(answer_key=key()))
    dead.stop()  # nothing listens on its port: every attempt there is refused
    healthy = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.01)))
    results = run(model(urls_of(dead, healthy), retry=0), lambda b: gather(b, prompts()))
    assert right(results)


@pytest.mark.reliability
def test_a_replica_that_answers_500_is_avoided_then_ejected(sim_factory) -> None:
    # It fails in a millisecond, so by the fewest in flight alone it would take nearly every
    # request; once it has failed it takes one at a time, until it is ejected.
    broken = sim_factory(SimConfig(answer_key=key(), faults=Faults(rate_500=1.0)))
    healthy = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.01)))

    async def go(b: Backend) -> tuple[list[Any], str]:
        return await gather(b, prompts(100)), b.router.replicas[0].state

    results, state = run(model(urls_of(broken, healthy), retry=0), go)
    failed = [r for r in results if isinstance(r, BackendError)]
    assert len(failed) <= 6 and all(e.status == 500 for e in failed)  # the first ones out, before it was known
    assert state == EJECTED
    assert broken.stats.requests_total <= 8


@pytest.mark.reliability
def test_a_429_with_retry_after_holds_only_its_replica(sim_factory) -> None:
    refusing = sim_factory(SimConfig(answer_key=key(), faults=Faults(rate_429=1.0, retry_after=30.0)))
    healthy = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.01)))

    async def go(b: Backend) -> tuple[list[Any], int]:
        with anyio.fail_after(20):  # a model-wide hold would keep every request 30 s
            return await gather(b, prompts(60)), b.retries

    results, retries = run(model(urls_of(refusing, healthy), retry=0), go)
    assert right(results, 60)  # each refused request went to the other replica, free
    assert retries == 0
    assert refusing.stats.requests_total <= 8  # held for 30 s after its first refusals


@pytest.mark.reliability
def test_a_replica_refusing_with_503_is_not_ejected_and_its_requests_go_elsewhere(sim_factory) -> None:
    full = sim_factory(SimConfig(answer_key=key(), faults=Faults(fail_first=1000, fail_first_kind="503", retry_after=0.0)))
    healthy = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.01)))

    async def go(b: Backend) -> tuple[list[Any], str]:
        return await gather(b, prompts(60)), b.router.replicas[0].state

    results, state = run(model(urls_of(full, healthy), retry=0), go)
    assert right(results, 60)
    assert state == UP  # "full" is the limit's business, not a reason to take it out


def test_a_health_check_answering_4xx_means_the_server_is_up_and_5xx_that_it_is_not() -> None:
    async def models_missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no such route")

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=503, text="loading")

    with LoopbackServer({"/a/v1/models": models_missing, "/b/v1/models": broken}) as srv:
        cfg = ModelConfig.model_validate({"abbr": "m", "type": "openai-chat", "model": "x", "url": [f"{srv.url}/a/v1", f"{srv.url}/b/v1"]})

        async def main() -> list[str | None]:
            async with make_client(cfg) as client:
                backend = make_backend(cfg, client)
                return [await backend._health(r) for r in backend.router.replicas]

        up, down = anyio.run(main)
    assert up is None
    assert down is not None and "503" in down


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

    results, retries = run(model(urls_of(a, b), retry=0), go, probes=True)
    assert right(results, 8) and len(downs) == 1
    assert retries == 0  # neither the cut and refused attempts nor the wait cost any


def test_one_url_is_a_fleet_of_one_marked_down_once_its_health_check_goes_unanswered(sim_factory) -> None:
    """Issue 23: a lone url is no longer never ejected. The third request is cut, its server's
    health check refused: the server is down, and the requests wait for it (here no probe brings it
    back) until down_timeout, then fail as `down` — having spent none of their retries."""
    sim = sim_factory(SimConfig(answer_key=key(), die_after=2))

    async def go(be: Backend) -> tuple[list[Any], str]:
        return await gather(be, prompts(6), width=1), be.router.replicas[0].state

    results, state = run(model(urls_of(sim)[0:1], down_timeout=0.5), go)
    assert results[:2] == ["1", "2"] and all(isinstance(r, BackendError) and r.kind == "down" for r in results[2:]), results
    assert "every replica was down for 0.5 s" in str(results[2]) and state == EJECTED


def test_one_url_that_never_answered_fails_as_before_without_a_pause(sim_factory) -> None:
    """Before its server has answered in the run (a wrong url?), a lone url's failures are the
    retry loop's: no waiting for a server that may never have been there."""
    sim = sim_factory(SimConfig(answer_key=key()))
    sim.stop()

    async def go(be: Backend) -> list[Any]:
        return await gather(be, prompts(3), width=1)

    results = run(model(urls_of(sim)[0:1]), go, limit=10.0)
    assert all(isinstance(r, BackendError) and r.kind == "connect" and r.attempts == 2 for r in results), results


def test_the_answering_replica_is_known_after_each_request(sim_factory) -> None:
    """What the per-sample log records of each attempt: the replica it went to."""
    a, b = (sim_factory(SimConfig(answer_key=key())) for _ in range(2))

    async def go(be: Backend) -> list[str]:
        seen = []
        for p in prompts(4):
            trace = Trace()
            await be.generate(p, trace=trace)
            (attempt,) = trace.attempts
            seen.append(attempt[4])
        return seen

    assert run(model(urls_of(a, b)), go) == [urls_of(a)[0], urls_of(b)[0]] * 2


@pytest.mark.parametrize(("type", "url", "health"), [
    ("lightllm", "http://h:1/generate", "http://h:1/health"),
    ("lightllm", "http://h:1/m/generate", "http://h:1/m/health"),
    ("openai-chat", "http://h:1/v1", "http://h:1/v1/models"),
    ("openai-completions", "http://h:1/x/v1/completions?api-version=1", "http://h:1/x/v1/models?api-version=1"),
    ("lightllm-chat", "http://h:1/v1", "http://h:1/health"),
    ("openai-chat", "https://r.openai.azure.com/openai/deployments/gpt4?api-version=2024-02-01",
     "https://r.openai.azure.com/openai/models?api-version=2024-02-01"),
])
def test_each_protocol_probes_the_health_check_its_servers_have(type: str, url: str, health: str) -> None:
    cfg = ModelConfig.model_validate({"abbr": "m", "type": type, "url": [url, "http://other:2/v1"], "model": "x"})

    async def main() -> str:
        async with make_client(cfg) as client:
            return str(make_backend(cfg, client).router.replicas[0].health)

    assert anyio.run(main) == health


# ------------------------------------------------------------------------------ the router alone


def router(n: int, cap: int, clock: Any = None, probe: Any = None) -> Router:
    async def healthy(r: Replica) -> str | None:
        return None

    replicas = [Replica(i, f"http://r{i}", URL(f"http://r{i}/generate"), URL(f"http://r{i}/health"), cap, None) for i in range(n)]
    return Router(replicas, down_timeout=5.0, probe=probe or healthy, **({"clock": clock} if clock else {}))


def fail(rt: Router, r: Replica, n: int = EJECT_AFTER, status: int = 500) -> None:
    """`n` attempts at `r` that end with `status`."""
    for _ in range(n):
        r.in_flight += 1
        rt.in_flight += 1
        rt.release(r, r.epoch, 0.0, status, f"HTTP {status}: no")


def answer(rt: Router, r: Replica) -> None:
    r.in_flight += 1
    rt.in_flight += 1
    rt.release(r, r.epoch, 0.0, 200)


@pytest.mark.reliability
def test_a_replica_ejected_again_soon_after_it_came_back_waits_longer_each_time() -> None:
    # Its health check passes but its requests fail: it must not come back every second.
    clock = FakeClock()

    async def main() -> list[float]:
        rt = router(2, 8, clock)
        a, b = rt.replicas
        answer(rt, b)  # the other answers: ejection may begin
        waits = []
        for _ in range(8):
            fail(rt, a)
            assert a.state == EJECTED
            waits.append(a.due - clock.now)
            clock.now = a.due
            await rt._probe_one(a)  # passes
            assert a.state == UP
            clock.now += 1.0
        clock.now += rs.HEALTHY_FOR  # then up for long enough: forgiven
        fail(rt, a)
        waits.append(a.due - clock.now)
        return waits

    waits = anyio.run(main)
    assert waits == [rs.FIRST_BACK_OFF * 2 ** k for k in range(6)] + [rs.MAX_BACK_OFF, rs.MAX_BACK_OFF, rs.FIRST_BACK_OFF]


@pytest.mark.reliability
def test_a_failed_probe_tries_again_within_a_few_seconds() -> None:
    clock = FakeClock()

    async def down(r: Replica) -> str | None:
        return "connect: refused"

    async def main() -> list[float]:
        rt = router(2, 8, clock, probe=down)
        a, b = rt.replicas
        answer(rt, b)
        fail(rt, a)
        gaps = []
        for _ in range(6):
            clock.now = a.due
            await rt._probe_one(a)
            gaps.append(a.due - clock.now)
        return gaps

    gaps = anyio.run(main)
    assert gaps == [2.0, 4.0, rs.PROBE_MAX, rs.PROBE_MAX, rs.PROBE_MAX, rs.PROBE_MAX]


def test_refusals_do_not_eject_a_replica_unless_it_refuses_everything_for_a_while() -> None:
    clock = FakeClock()

    async def main() -> tuple[str, str]:
        rt = router(2, 8, clock)
        a, b = rt.replicas
        answer(rt, b)
        fail(rt, a, 20, status=503)
        fail(rt, a, 20, status=429)
        after_burst = a.state
        clock.now += rs.REFUSING_FOR
        fail(rt, a, 1, status=503)
        return after_burst, a.state

    assert anyio.run(main) == (UP, EJECTED)


def test_a_replica_that_failed_before_any_answer_is_ejected_when_another_answers() -> None:
    async def main() -> str:
        rt = router(2, 8)
        a, b = rt.replicas
        fail(rt, a, EJECT_AFTER, status=NO_REPLY)
        assert a.state == UP  # nothing has answered yet: a wrong url fails as fast as with one
        answer(rt, b)
        return a.state

    assert anyio.run(main) == EJECTED


@pytest.mark.reliability
def test_each_ejected_replica_is_probed_on_its_own() -> None:
    # One replica's health check hangs (up to its timeout): another ejected meanwhile is
    # probed when it is due, and comes back, all the same.
    hang = anyio.Event()

    async def probe(r: Replica) -> str | None:
        if r.index == 0:
            await hang.wait()
        return None

    async def main() -> str:
        rt = router(3, 8, probe=probe)
        a, b, c = rt.replicas
        answer(rt, c)
        fail(rt, a)
        a.due = 0.0
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(rt.run_probes)
                while a.state != "probing":
                    await anyio.sleep(0.01)
                fail(rt, b)
                b.due = 0.0
                while b.state != UP:
                    await anyio.sleep(0.01)
                state = a.state
                hang.set()
                tg.cancel_scope.cancel()
        return state

    assert anyio.run(main) == "probing"


def test_the_router_is_silent_only_when_every_replica_failed_and_none_answered() -> None:
    async def main() -> list[bool]:
        rt = router(2, 8)
        a, b = rt.replicas
        seen = [rt.silent()]  # none tried yet
        fail(rt, a, 1, status=NO_REPLY)
        seen.append(rt.silent())  # the other not tried yet
        fail(rt, b, 1, status=NO_REPLY)
        seen.append(rt.silent())
        answer(rt, b)
        seen.append(rt.silent())
        rt.mark()  # a later pass (a retry of the run) asks anew
        fail(rt, a, 1, status=NO_REPLY)
        fail(rt, b, 1, status=NO_REPLY)
        seen.append(rt.silent())
        return seen

    assert anyio.run(main) == [False, False, True, False, True]
