"""Backends against the real simulated server on 127.0.0.1: formats, retries, limits."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from evaltui.backends import Backend, BackendError, Backoff, TokenBucket, make_backend, make_client
from evaltui.backends.lightllm import PPL_FLAG_HINT
from evaltui.plan import ModelConfig
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig

QUESTION = "Question: what is 17 + 25?"
ANSWER = "17 + 25 = 42\n#### 42"


def model_cfg(url: str, type: str = "lightllm", **kw: Any) -> ModelConfig:
    data: dict[str, Any] = {"abbr": "m", "type": type, "url": url, "retry": 2, "backoff": 0.0, "timeout": 10.0}
    if type != "lightllm":
        data["model"] = "sim-model"
    data.update(kw)
    return ModelConfig.model_validate(data)


def key() -> AnswerKey:
    k = AnswerKey()
    k.add_gen(QUESTION, ANSWER)
    k.add_ppl("17 + 25 =", [" 42", " 43", " 41"], " 42")
    return k


def run(cfg: ModelConfig, fn, **backend_kw: Any):  # type: ignore[no-untyped-def]
    """Run `fn(backend)` with a fresh client, as the engine does, and return its result."""

    async def main():  # type: ignore[no-untyped-def]
        async with make_client(cfg) as client:
            return await fn(make_backend(cfg, client, **backend_kw))

    return anyio.run(main)


def url_for(sim, type: str) -> str:  # type: ignore[no-untyped-def]
    return f"{sim.url}/generate" if type == "lightllm" else f"{sim.url}/v1"


# ------------------------------------------------------------------------------ happy paths


@pytest.mark.parametrize("type", ["lightllm", "lightllm-chat", "openai-chat", "openai-completions"])
def test_generate_returns_the_answer_and_sends_max_new_tokens(sim_factory, type: str) -> None:
    sim = sim_factory(SimConfig(answer_key=key()))
    cfg = model_cfg(url_for(sim, type), type, generation_kwargs={"do_sample": False, "max_new_tokens": 77})
    assert run(cfg, lambda b: b.generate(QUESTION)) == ANSWER
    (rec,) = sim.stats.log
    assert rec.prompt == QUESTION
    sent = rec.params.get("max_new_tokens", rec.params.get("max_tokens"))
    assert sent == 77
    from evaltui.sim.server import CHAT, COMPLETIONS, GENERATE

    expected_endpoint = {"lightllm": GENERATE, "openai-completions": COMPLETIONS}.get(type, CHAT)
    assert rec.endpoint == expected_endpoint
    if type != "lightllm":
        assert rec.model == "sim-model"
        assert rec.params["temperature"] == 0.0


def test_max_new_tokens_truncates_what_the_server_generates(sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=key()))
    cfg = model_cfg(url_for(sim, "lightllm"), generation_kwargs={"max_new_tokens": 2})
    text = run(cfg, lambda b: b.generate(QUESTION))
    assert text == "17 +"


def test_chat_sends_the_system_message(sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=key()))
    cfg = model_cfg(url_for(sim, "openai-chat"), "openai-chat")
    assert run(cfg, lambda b: b.generate(QUESTION, system="You are terse.")) == ANSWER


def test_tgi_style_string_and_missing_content_type_are_accepted(sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=key(), generated_text_as_string=True, omit_content_type=True))
    assert run(model_cfg(url_for(sim, "lightllm")), lambda b: b.generate(QUESTION)) == ANSWER


@pytest.mark.parametrize("type", ["lightllm", "openai-completions"])
def test_ppl_prefers_the_known_continuation(sim_factory, type: str) -> None:
    sim = sim_factory(SimConfig(answer_key=key()))
    cfg = model_cfg(url_for(sim, type), type)

    async def ppls(b: Backend) -> list[float]:
        return [await b.ppl("17 + 25 =" + c) for c in (" 42", " 43", " 41")]

    values = run(cfg, ppls)
    assert values[0] < values[1] and values[0] < values[2]
    assert all(v > 0 for v in values)


def test_ppl_follows_the_lightllm_layout_exactly(sim_factory) -> None:
    """The mean NLL equals OpenCompass's ce_loss computed from the raw reply."""
    sim = sim_factory(SimConfig(answer_key=key()))
    raw = httpx.post(f"{sim.url}/generate", json={"inputs": "17 + 25 = 42", "parameters": {"max_new_tokens": 1}}).json()
    ids = raw["prompt_token_ids"][1:]
    lps = [item[1] for item in raw["prompt_logprobs"]]
    logprobs = [lp[str(t)] for t, lp in zip(ids, lps, strict=False)]
    expected = -sum(logprobs) / len(logprobs)
    got = run(model_cfg(url_for(sim, "lightllm")), lambda b: b.ppl("17 + 25 = 42"))
    assert got == pytest.approx(expected)


def test_ppl_without_prompt_logprobs_names_the_server_flag(sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=key(), prompt_logprobs=False))
    with pytest.raises(BackendError) as err:
        run(model_cfg(url_for(sim, "lightllm")), lambda b: b.ppl("17 + 25 = 42"))
    assert "--return_all_prompt_logprobs" in str(err.value)
    assert err.value.message == PPL_FLAG_HINT
    assert sim.stats.requests_total == 1  # retrying cannot help: fail at once


def test_api_key_comes_from_the_environment(sim_factory, monkeypatch) -> None:
    monkeypatch.setenv("EVALTUI_TEST_KEY", "s3cret")
    sim = sim_factory(SimConfig(answer_key=key()))
    cfg = model_cfg(url_for(sim, "openai-chat"), "openai-chat", api_key_env="EVALTUI_TEST_KEY")

    async def headers(b: Backend) -> dict[str, str]:
        await b.generate(QUESTION)
        return dict(b._headers)

    assert run(cfg, headers)["authorization"] == "Bearer s3cret"


# ------------------------------------------------------------------------------ retries


@pytest.mark.parametrize("kind", ["429", "500", "503", "408", "malformed", "drop", "slow"])
def test_each_fault_kind_is_retried_then_succeeds(sim_factory, kind: str) -> None:
    faults = Faults(fail_first=2, fail_first_kind=kind, retry_after=0.01, slow_seconds=5.0)
    sim = sim_factory(SimConfig(answer_key=key(), faults=faults))
    cfg = model_cfg(url_for(sim, "lightllm"), retry=2, timeout=0.5)
    assert run(cfg, lambda b: b.generate(QUESTION)) == ANSWER
    assert sim.stats.attempts[("default", QUESTION)] == 3


@pytest.mark.parametrize("kind", ["500", "drop", "malformed", "slow"])
def test_attempts_never_exceed_retry_plus_one(sim_factory, kind: str) -> None:
    faults = Faults(fail_first=10, fail_first_kind=kind, retry_after=0.0, slow_seconds=5.0)
    sim = sim_factory(SimConfig(answer_key=key(), faults=faults))
    cfg = model_cfg(url_for(sim, "openai-chat"), "openai-chat", retry=3, timeout=0.3)
    with pytest.raises(BackendError) as err:
        run(cfg, lambda b: b.generate(QUESTION))
    assert err.value.retryable and err.value.attempts == 4
    assert sim.stats.attempts[("sim-model", QUESTION)] == 4


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 417, 422])
def test_non_retryable_status_fails_at_once_with_the_servers_message(sim_factory, status: int) -> None:
    faults = Faults(fail_first=1, fail_first_kind=str(status))
    sim = sim_factory(SimConfig(answer_key=key(), faults=faults))
    cfg = model_cfg(url_for(sim, "openai-completions"), "openai-completions", retry=4)
    with pytest.raises(BackendError) as err:
        run(cfg, lambda b: b.generate(QUESTION))
    assert err.value.status == status and err.value.attempts == 1 and not err.value.retryable
    assert f"simulated {status}" in err.value.message
    assert sim.stats.requests_total == 1


def test_prompt_too_long_is_not_retried(sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=key(), faults=Faults(max_prompt_chars=10)))
    with pytest.raises(BackendError) as err:
        run(model_cfg(url_for(sim, "lightllm"), retry=4), lambda b: b.generate(QUESTION))
    assert err.value.status == 400 and "too long" in err.value.message
    assert sim.stats.requests_total == 1


def test_connection_refused_is_retried_and_bounded() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    cfg = model_cfg(f"http://127.0.0.1:{port}/generate", retry=2)
    with pytest.raises(BackendError) as err:
        run(cfg, lambda b: b.generate(QUESTION))
    assert err.value.kind == "connect" and err.value.attempts == 3
    assert err.value.message.startswith(f"Cannot connect to host 127.0.0.1:{port} [") and "ssl:" not in err.value.message  # plain http: no TLS

    async def health_check() -> str:
        import aiohttp
        from yarl import URL

        from evaltui.backends.client import RequestFailed

        async with make_client(cfg) as client:
            try:
                await client.get(URL(f"http://127.0.0.1:{port}/health"), {}, aiohttp.ClientTimeout(total=5))
            except RequestFailed as e:
                return str(e)
        return "answered"

    said = anyio.run(health_check)  # a replica's health check words it the same way
    assert said.startswith(f"Cannot connect to host 127.0.0.1:{port} [") and "ssl:" not in said


def test_retry_after_is_honoured(sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=key(), faults=Faults(fail_first=2, fail_first_kind="429", retry_after=7.5)))
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    cfg = model_cfg(url_for(sim, "lightllm"), retry=3, backoff=0.1)
    assert run(cfg, lambda b: b.generate(QUESTION), sleep=fake_sleep) == ANSWER
    assert slept == [7.5, 7.5]


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    import random

    b = Backoff(base=1.0, cap=10.0, rng=random.Random(0))
    for n, (lo, hi) in enumerate([(0.5, 1), (1, 2), (2, 4), (4, 8), (5, 10), (5, 10)], start=1):
        for _ in range(20):
            assert lo <= b.delay(n) <= hi
    assert b.delay(1, retry_after=30.0) == 30.0


# ------------------------------------------------------------------------------ rate limit


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        # Every sleeper wakes at its own deadline; the clock only moves forward.
        deadline = self.now + seconds
        await anyio.sleep(0)
        self.now = max(self.now, deadline)


def test_token_bucket_holds_its_rate_under_concurrency() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=5.0, clock=clock, sleep=clock.sleep)
    grants: list[float] = []

    async def take() -> None:
        await bucket.acquire()
        grants.append(clock.now)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(take)

    anyio.run(main)
    grants.sort()
    assert len(grants) == 50
    # 50 requests at 5/s need at least 49 intervals of 0.2 s, however many ask at once.
    assert grants[-1] - grants[0] == pytest.approx(49 * 0.2)
    window = [t for t in grants if t < grants[0] + 1.0]
    assert len(window) <= 5


@pytest.mark.parametrize("rate", [0.0, 5.0])
def test_a_retry_after_holds_back_every_caller_of_the_bucket(rate: float) -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=rate, clock=clock, sleep=clock.sleep)
    bucket.hold(30.0)
    grants: list[float] = []

    async def take() -> None:
        await bucket.acquire()
        grants.append(clock.now)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(take)

    anyio.run(main)
    assert len(grants) == 4 and min(grants) >= 1030.0


def test_a_429_with_retry_after_holds_the_models_other_requests(sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=key(), faults=Faults(fail_first=1, fail_first_kind="429", retry_after=40.0)))
    clock = FakeClock()
    bucket = TokenBucket(rate=0.0, clock=clock, sleep=clock.sleep)

    async def no_sleep(seconds: float) -> None:
        pass

    cfg = model_cfg(url_for(sim, "lightllm"), retry=2, backoff=0.0)
    assert run(cfg, lambda b: b.generate(QUESTION), sleep=no_sleep, bucket=bucket) == ANSWER
    assert clock.now == 1000.0  # the request that was told to wait slept it out itself, once

    async def another() -> float:
        await bucket.acquire()
        return clock.now

    assert anyio.run(another) >= 1040.0  # any other worker's request waits too


def test_token_bucket_unlimited_never_sleeps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=0.0, clock=clock, sleep=clock.sleep)

    async def main() -> None:
        for _ in range(100):
            await bucket.acquire()

    anyio.run(main)
    assert clock.now == 1000.0


def test_rate_limit_applies_to_real_requests(sim_factory) -> None:
    """Each attempt takes a token: 6 requests at rate 4/s are spread over ≥ 1.25 s of bucket time."""
    sim = sim_factory(SimConfig(answer_key=key(), default=ModelProfile(latency=0.0)))
    clock = FakeClock()
    cfg = model_cfg(url_for(sim, "lightllm"), rate_per_worker=4.0)
    bucket = TokenBucket(cfg.rate_per_worker, clock=clock, sleep=clock.sleep)

    async def six(b: Backend) -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(b.generate, QUESTION)

    run(cfg, six, bucket=bucket)
    assert sim.stats.requests_total == 6
    assert clock.now - 1000.0 == pytest.approx(5 * 0.25)
