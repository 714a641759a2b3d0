"""Replies a hostile or broken server sends that the hostile round of issue 23 found mishandled
(RELIABILITY.md §11): arrays nested a million deep, a `usage` of 5,000 digits, a Retry-After of
eleven days. Each against a loopback server (tests/hostile.py), through the real client."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from aiohttp import web
from hostile import LoopbackServer

from evaltui.backends import BackendError, TokenBucket, make_backend, make_client
from evaltui.plan import ModelConfig

pytestmark = pytest.mark.reliability


def model_cfg(url: str, type: str = "lightllm", **kw: Any) -> ModelConfig:
    data: dict[str, Any] = {"abbr": "m", "type": type, "url": url, "retry": 1, "backoff": 0.0, "timeout": 10.0, **kw}
    if type != "lightllm":
        data["model"] = "m"
    return ModelConfig.model_validate(data)


def ask(cfg: ModelConfig, **backend_kw: Any) -> str | BackendError:
    async def main() -> str | BackendError:
        async with make_client(cfg) as client:
            backend = make_backend(cfg, client, **backend_kw)
            try:
                return await backend.generate("what is 6 * 7?")
            except BackendError as e:
                return e

    return anyio.run(main)


async def nested(request: web.Request) -> web.StreamResponse:
    depth = 1_000_000
    return web.Response(body=b'{"generated_text": ' + b"[" * depth + b"]" * depth + b"}", content_type="application/json")


async def huge_usage(request: web.Request) -> web.StreamResponse:
    digits = b"9" * 5000
    body = b'{"choices": [{"message": {"content": "The answer is 42"}}], "usage": {"prompt_tokens": ' + digits + b', "completion_tokens": 7}}'
    return web.Response(body=body, content_type="application/json")


async def huge_lightllm_usage(request: web.Request) -> web.StreamResponse:
    body = b'{"generated_text": ["The answer is 42"], "prompt_tokens": ' + b"1" * 400 + b', "count_output_tokens": 3}'
    return web.Response(body=body, content_type="application/json")


def test_a_reply_of_a_million_nested_arrays_is_a_bad_reply_retried_not_internal() -> None:
    """It failed as `internal` (a RecursionError in the JSON fallback) and was not retried."""
    with LoopbackServer({"/generate": nested}) as srv:
        got = ask(model_cfg(f"{srv.url}/generate"))
        asked = srv.requests["/generate"]
    assert isinstance(got, BackendError)
    assert (got.kind, got.status, got.attempts) == ("bad-reply", 200, 2), got
    assert "nested too deeply" in got.message
    assert asked == 2  # retried, as an unparseable reply is


@pytest.mark.parametrize(("path", "type"), [("/v1/chat/completions", "openai-chat"), ("/generate", "lightllm")])
def test_a_usage_of_thousands_of_digits_does_not_fail_the_answer_beside_it(path: str, type: str) -> None:
    """A `usage` field with a 5,000-digit integer failed a correct answer; with a token budget a
    400-digit one was charged as it stood. It is no count: the answer is kept, the tokens it
    reports are none."""
    handler = huge_usage if type == "openai-chat" else huge_lightllm_usage
    with LoopbackServer({path: handler}) as srv:
        url = f"{srv.url}/v1" if type == "openai-chat" else f"{srv.url}/generate"
        cfg = model_cfg(url, type, tokens_per_minute=1_000_000)

        async def main() -> tuple[str, int]:
            async with make_client(cfg) as client:
                backend = make_backend(cfg, client)
                answer = await backend.generate("what is 6 * 7?")
                return answer, backend.tokens_used

        answer, used = anyio.run(main)
    assert answer == "The answer is 42"
    assert used == (7 if type == "openai-chat" else 3)  # the count it gave that is one


def test_a_long_retry_after_is_said_with_what_is_waited_and_until_when() -> None:
    """A 429 with `Retry-After: 999999` waited 300 s (the cap) per retry with nothing on screen but
    `0/3`. It is said once, with the cap and the time the wait ends (the sleep is the test's)."""
    slept: list[float] = []
    said: list[str] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def patient(request: web.Request) -> web.StreamResponse:
        """429 with Retry-After: 999999 (eleven days) on the first request, then the answer."""
        if srv.requests["/generate"] == 1:
            return web.json_response({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "999999"})
        return web.json_response({"generated_text": ["The answer is 42"]})

    with LoopbackServer({"/generate": patient}) as srv:
        cfg = model_cfg(f"{srv.url}/generate")

        async def main() -> str:
            async with make_client(cfg) as client:
                backend = make_backend(cfg, client, sleep=sleep, bucket=TokenBucket(0, sleep=sleep))
                backend.on_hold = said.append
                return await backend.generate("what is 6 * 7?")

        answer = anyio.run(main)
    assert answer == "The answer is 42"
    assert 300.0 in slept and max(slept) == 300.0  # the cap, and no more
    (line,) = said
    assert line.startswith(f"http://127.0.0.1:{srv.port}/generate answered HTTP 429 with Retry-After: every request of the model waits 300 s, until ")
    assert line.endswith("(it asked for 999,999 s; 300 s is the most evaltui waits)")


def test_the_engine_reports_a_hold_as_a_warning_naming_the_model() -> None:
    from evaltui.engine.stream import events as ev
    from evaltui.engine.unit.answer import ModelAnswerer

    cfg = model_cfg("http://127.0.0.1:9/generate")
    seen: list[ev.Event] = []

    async def main() -> None:
        async with make_client(cfg) as client:
            backend = make_backend(cfg, client)
            ModelAnswerer(cfg, backend, seen.append)
            assert backend.on_hold is not None
            backend.on_hold("http://127.0.0.1:9/generate answered HTTP 429 with Retry-After: …")

    anyio.run(main)
    assert seen == [ev.Notice("m: http://127.0.0.1:9/generate answered HTTP 429 with Retry-After: …", "warning")]


def test_a_timeout_the_event_loop_caused_is_not_charged_to_the_server() -> None:
    """10,000 datasets starved the event loop: attempts measured 7.3 s against `timeout = 5` on a
    server answering in 1 ms, and failed as timeouts. Here the loop is blocked for 1.5 s while a
    0.05 s answer is on its way (timeout 0.5 s, retry 0): the timeout fires late, and the attempt
    is sent again rather than charged to the server."""
    import asyncio
    import time

    async def quick(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return web.json_response({"generated_text": ["The answer is 42"]})

    with LoopbackServer({"/generate": quick}) as srv:
        cfg = model_cfg(f"{srv.url}/generate", retry=0, timeout=0.5)

        async def main() -> str | BackendError:
            async with make_client(cfg) as client:
                backend = make_backend(cfg, client)
                await backend.generate("warm up")  # the connection is there: the stall is the loop's alone
                asyncio.get_running_loop().call_later(0.01, time.sleep, 1.5)  # something else holds the loop
                try:
                    return await backend.generate("what is 6 * 7?")
                except BackendError as e:
                    return e

        got = anyio.run(main)
    assert got == "The answer is 42", got
