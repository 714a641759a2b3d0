"""The simulator playing one replica of a fleet: a capacity it refuses beyond (429), a death after
N requests, the health checks a client probes it with, and the tokens its replies report."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import pytest

from evaltui.sim import ModelProfile, SimConfig, SimServer, SimThread


async def _post(client: httpx.AsyncClient, url: str, prompt: str) -> int | str:
    try:
        r = await client.post(url, json={"inputs": prompt})
    except httpx.TransportError as e:
        return type(e).__name__
    return r.status_code


def test_more_than_max_in_flight_at_once_is_refused_with_429_and_retry_after() -> None:
    async def main() -> tuple[list[int | str], SimServer]:
        async with SimServer(SimConfig(default=ModelProfile(latency=0.3), max_in_flight=3)) as sim:
            async with httpx.AsyncClient(trust_env=False, timeout=10) as c:
                statuses = await asyncio.gather(*(_post(c, f"{sim.url}/m/generate", f"q{i}") for i in range(5)))
                r = await c.post(f"{sim.url}/m/generate", json={"inputs": "again"})  # the three have finished
                assert r.status_code == 200
            return list(statuses), sim

    statuses, sim = asyncio.run(main())
    assert sorted(statuses, key=str) == [200, 200, 200, 429, 429]
    stats = sim.stats
    assert stats.faults["busy"] == 2 and stats.max_in_flight <= 5
    assert sorted(r.status for r in stats.log) == [200, 200, 200, 200, 429, 429]
    assert sum(stats.attempts.values()) == 4  # a refusal is no attempt at the model


def test_the_429_of_a_full_server_says_retry_after() -> None:
    with SimThread(SimConfig(default=ModelProfile(latency=0.5), max_in_flight=1)) as sim:
        with httpx.Client(base_url=sim.url, trust_env=False, timeout=10) as c:

            async def two() -> list[httpx.Response]:
                async with httpx.AsyncClient(base_url=sim.url, trust_env=False, timeout=10) as ac:
                    return list(await asyncio.gather(*(ac.post("/generate", json={"inputs": f"x{i}"}) for i in range(2))))

            replies = asyncio.run(two())
            refused = next(r for r in replies if r.status_code == 429)
            assert refused.headers["retry-after"] == "1" and "in flight" in refused.json()["error"]["message"]
            assert c.get("/health").status_code == 200


def test_a_server_that_serves_one_at_a_time_answers_in_line() -> None:
    """`serve_at_once = 1` plays llama.cpp with one slot: four requests sent together are each
    answered one latency after the one before, first come first served; none is refused."""

    async def main() -> list[float]:
        async with SimServer(SimConfig(default=ModelProfile(latency=0.2), serve_at_once=1)) as sim:
            async with httpx.AsyncClient(trust_env=False, timeout=10) as c:
                loop = asyncio.get_running_loop()
                start = loop.time()

                async def one(i: int) -> float:
                    await asyncio.sleep(0.01 * i)  # in this order
                    r = await c.post(f"{sim.url}/m/generate", json={"inputs": f"q{i}"})
                    assert r.status_code == 200
                    return loop.time() - start

                return list(await asyncio.gather(*(one(i) for i in range(4))))

    done = asyncio.run(main())
    assert done == sorted(done)
    gaps = [b - a for a, b in zip([0.0, *done[:-1]], done, strict=True)]
    assert all(g >= 0.18 for g in gaps), gaps  # one latency each at least: in line, not side by side


def test_a_replica_dies_after_n_requests_cutting_those_in_flight_and_listening_no_more() -> None:
    async def main() -> tuple[list[int | str], int | str, bool]:
        sim = await SimServer(SimConfig(default=ModelProfile(latency=0.2), die_after=3)).start()
        async with httpx.AsyncClient(trust_env=False, timeout=10) as c:
            first = await asyncio.gather(*(_post(c, f"{sim.url}/m/generate", f"q{i}") for i in range(2)))
            cut = await asyncio.gather(*(_post(c, f"{sim.url}/m/generate", f"r{i}") for i in range(2)))
            await asyncio.wait_for(sim.died.wait(), 10)
            after = await _post(c, f"{sim.url}/m/generate", "late")
        await sim.stop()
        return [*first, *cut], after, sim.died.is_set()

    statuses, after, died = asyncio.run(main())
    assert statuses[:2] == [200, 200]
    assert all(isinstance(s, str) for s in statuses[2:])  # the third request was taken, then cut with the fourth
    assert after == "ConnectError" and died


@pytest.mark.parametrize(("path", "body"), [("/m/health", {"status": "ok"}), ("/m/v1/models", None), ("/health", {"status": "ok"})])
def test_the_health_checks_a_client_probes_with_are_answered_under_a_model_prefix(path: str, body: dict | None) -> None:
    with SimThread(SimConfig()) as sim, httpx.Client(base_url=sim.url, trust_env=False, timeout=10) as c:
        r = c.get(path)
        assert r.status_code == 200
        if body is not None:
            assert r.json() == body
        else:
            assert [m["id"] for m in r.json()["data"]] == ["m"]
        assert sim.stats.requests_total == 0  # a probe is not a model request


def test_the_stats_count_the_tokens_the_replies_report() -> None:
    with SimThread(SimConfig()) as sim, httpx.Client(base_url=sim.url, trust_env=False, timeout=10) as c:
        chat = c.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "one two three"}], "max_tokens": 4}).json()
        light = c.post("/generate", json={"inputs": "four five", "parameters": {"max_new_tokens": 3}}).json()
        stats = c.get("/sim/stats").json()
    assert stats["tokens"] == chat["usage"]["total_tokens"] + light["prompt_tokens"] + light["count_output_tokens"]
    assert [r["status"] for r in stats["log"]] == [200, 200]


def test_serve_sim_takes_the_replica_flags_and_exits_when_it_dies() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "evaltui.sim", "--port", "0", "--die-after", "1", "--max-in-flight", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]
        with httpx.Client(base_url=url, trust_env=False, timeout=10) as c:
            assert c.post("/generate", json={"inputs": "hi"}).status_code == 200
            with pytest.raises(httpx.TransportError):
                c.post("/generate", json={"inputs": "bye"})
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("field", ["max_in_flight", "die_after", "serve_at_once"])
def test_the_replica_options_are_checked(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SimConfig(**{field: -1})
