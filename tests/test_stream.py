"""`stream = true`: streamed replies (SSE) from both dialects of the simulator, end to end on
loopback — the same answers and scores as whole replies, each answer's time to first token and
between tokens in the per-sample log, every model's latency profile in `--json` and the
summary; and what goes wrong on the wire: a stream cut half-way, split events, CRLF line ends,
a server that answers whole, a stream over max_reply_bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp import web
from hostile import LoopbackServer, stream
from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.backends import make_backend
from evaltui.backends.client import make_client
from evaltui.backends.trace import Trace
from evaltui.cli import main
from evaltui.plan import ModelConfig
from evaltui.sim import Faults, ModelProfile, SimConfig
from evaltui.sim.answers import answers_correctly

LATENCY, TOKEN_LATENCY = 0.03, 0.02


def completions(abbr: str, sim_url: str, **kw: Any) -> dict[str, Any]:
    return {**chat(abbr, sim_url, **kw), "type": "openai-completions"}


def _records(root: Path, model: str, dataset: str = "d") -> list[dict[str, Any]]:
    lines = (root / "logs" / "samples" / model / f"{dataset}.jsonl").read_text().splitlines()[1:]
    return [json.loads(line) for line in lines]


@pytest.fixture
def rows() -> list[dict[str, Any]]:
    return arithmetic(24)


def test_streamed_replies_score_as_whole_ones_and_time_each_token(tmp_path: Path, sim_factory: Any, rows: list[dict[str, Any]]) -> None:
    profile = ModelProfile(accuracy=0.75, latency=LATENCY, token_latency=TOKEN_LATENCY)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={name: profile for name in ("c", "p", "l", "whole")}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    whole = {**chat("whole", sim.url), "url": f"{sim.url}/c/v1", "model": "c"}  # c's answers, asked whole
    models = [chat("c", sim.url, stream=True), completions("p", sim.url, stream=True), lightllm("l", sim.url, stream=True), whole]
    code, _, runner = run_plan(write_plan(tmp_path, models=models, datasets=[gsm_dataset("d", data)]))
    assert code == 0
    root = runner.workdir.root
    scores = {m: json.loads((root / "results" / m / "d.json").read_text())["accuracy"] for m in ("c", "p", "l", "whole")}
    truth = {m: round(100 * sum(answers_correctly(m, r["question"], 0.75) for r in rows) / len(rows), 2) for m in ("c", "p", "l")}
    assert scores == {**truth, "whole": truth["c"]}  # the simulator's own decisions: the same answers, streamed or whole
    endpoints = sim.stats.endpoints
    assert endpoints["generate_stream"] == 24 and endpoints.get("generate", 0) == 0  # LightLLM's streaming endpoint
    for model in ("c", "p", "l"):
        records = _records(root, model)
        assert len(records) == 24
        for r in records:
            tokens = r["usage"]["completion_tokens"]
            assert tokens > 1 and LATENCY <= r["ttft"] < r["took"]  # the first token after the server's latency
            assert r["itl"] >= 0 and r["ttft"] + (tokens - 1) * r["itl"] <= r["took"] + 1e-3
        # the others token_latency apart (a piece of the network that brings two events times them alike)
        assert sorted(r["itl"] for r in records)[len(records) // 2] >= TOKEN_LATENCY * 0.5
    assert all("ttft" not in r and "itl" not in r for r in _records(root, "whole"))


def test_the_latency_profile_in_json_and_the_summary(tmp_path: Path, sim_factory: Any, rows: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"c": ModelProfile(latency=LATENCY, token_latency=TOKEN_LATENCY), "w": ModelProfile(latency=LATENCY)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[chat("c", sim.url, stream=True), lightllm("w", sim.url)], datasets=[gsm_dataset("d", data)])
    assert main([str(plan), "--json"]) == 0
    models = json.loads(capsys.readouterr().out)["models"]
    c, w = models["c"], models["w"]
    assert c["requests"] == w["requests"] == 24 and c["streamed"] == 24 and "streamed" not in w and "ttft" not in w
    assert LATENCY * 0.99 <= c["latency"]["p50"] <= c["latency"]["p90"] <= c["latency"]["p99"]
    assert LATENCY * 0.99 <= c["ttft"]["p50"] < c["latency"]["p50"] and c["itl"]["p50"] >= TOKEN_LATENCY * 0.5
    assert LATENCY * 0.99 <= w["latency"]["p50"] and w["requests_per_s"] > 0 and w["tokens_per_s"] > 0  # whole replies too
    summary = tmp_path / "out" / "summary"
    (txt,) = summary.glob("summary_*.txt")
    assert "Latency and throughput" in txt.read_text() and "ttft p50" in txt.read_text()
    (csv_file,) = summary.glob("models_*.csv")
    lines = csv_file.read_text().splitlines()
    assert lines[0].startswith("model,answered,latency_p50_s") and [line.split(",")[:2] for line in lines[1:]] == [["c", "24"], ["w", "24"]]
    assert lines[2].split(",")[5] == ""  # no time to first token for a model that does not stream


def test_a_stream_cut_half_way_is_retried_and_said(tmp_path: Path, sim_factory: Any, rows: list[dict[str, Any]]) -> None:
    cut = Faults(fail_first=1, fail_first_kind="malformed")  # each prompt's first reply stops half-way: no last event
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=cut))
    data = write_jsonl(tmp_path / "d.jsonl", rows[:6])
    models = [chat("c", sim.url, stream=True), lightllm("l", sim.url, stream=True, retry=0)]
    code, _, runner = run_plan(write_plan(tmp_path, models=models, datasets=[gsm_dataset("d", data, fail_on_error=1.0)]))
    root = runner.workdir.root
    assert code == 0
    assert all([a[3] for a in r["attempts"]] == ["bad-reply", "ok"] for r in _records(root, "c"))  # retried, then answered
    failed = _records(root, "l")  # retry = 0: each fails, saying why
    assert all(r["error"]["type"] == "bad-reply" and "the stream ended before its last event" in r["error"]["message"] for r in failed)


async def _events(request: web.Request, pieces: list[bytes], *, content_type: str = "text/event-stream") -> web.StreamResponse:
    return await stream(request, iter(pieces), content_type=content_type)


CHUNK = b'{"choices": [{"index": 0, "delta": {"content": "%s"}, "finish_reason": null}]}'


def _answer(routes: dict[str, Any], **model: Any) -> tuple[str, Trace]:
    """One generate() of a streaming chat model against a loopback server with these routes."""
    trace = Trace()

    async def go() -> str:
        with LoopbackServer(routes) as server:
            cfg = ModelConfig.model_validate({"abbr": "m", "type": "openai-chat", "url": f"{server.url}/v1", "model": "m", "retry": 0, "stream": True, **model})
            async with make_client(cfg) as client:
                with anyio.fail_after(30):
                    return await make_backend(cfg, client).generate("hi", trace=trace)

    return anyio.run(go), trace


def test_events_split_anywhere_crlf_line_ends_and_comments_are_read() -> None:
    body = b": a comment the server sends to keep the line open\r\n\r\n"
    body += b"".join(b"data: " + CHUNK % word.encode() + b"\r\n\r\n" for word in ("The ", "answer ", "is 42"))
    body += b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}\r\n\r\ndata: [DONE]\r\n\r\n'
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]  # every event split across pieces

    async def handler(request: web.Request) -> web.StreamResponse:
        return await _events(request, pieces)

    answer, trace = _answer({"/v1/chat/completions": handler})
    assert answer == "The answer is 42" and (trace.prompt_tokens, trace.completion_tokens) == (3, 3) and trace.ttft is not None


def test_a_server_that_answers_whole_is_read_whole() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "42"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
        return web.json_response(body)

    answer, trace = _answer({"/v1/chat/completions": handler})
    assert answer == "42" and trace.ttft is None and [a[3] for a in trace.attempts] == ["ok"]


def test_a_stream_longer_than_max_reply_bytes_fails_its_sample() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await _events(request, [b"data: " + CHUNK % b"x" * 1 + b"\n\n"] * 200)

    from evaltui.backends import BackendError

    with pytest.raises(BackendError) as caught:
        _answer({"/v1/chat/completions": handler}, max_reply_bytes=4096)
    assert caught.value.kind == "reply-too-large" and "max_reply_bytes (4,096)" in caught.value.message


def test_stream_is_a_model_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(2))
    plan = write_plan(tmp_path, models=[lightllm("m", "http://127.0.0.1:9", stream="yes")], datasets=[gsm_dataset("d", data)])
    assert main([str(plan), "--no-ui"]) == 2
    err = capsys.readouterr().err
    assert "models[0].stream" in err and err.count("\n") == 1


def test_the_fleet_screen_and_the_report_say_the_profile(tmp_path: Path, sim_factory: Any, rows: list[dict[str, Any]]) -> None:
    import re

    from evaltui.latency import LatencyProfile
    from evaltui.ui.screens.fleet import latency_line

    profile = LatencyProfile()
    for k in range(100):
        profile.add(k * 0.1, 0.1 + k / 1000, 20, ttft=0.04, itl=0.003)
    line = latency_line(profile.snapshot())
    assert re.match(r"latency p50 1[45]\d ms · p90 1[89]\d ms · p99 (199|200|201) ms · first token p50 40 ms", line)  # within 1 %
    assert "between tokens p50 3 ms" in line and line.endswith("9.9 req/s, 198 tokens/s (100 answered)")
    assert latency_line(LatencyProfile().snapshot()) == "latency: nothing answered yet in this run"

    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"c": ModelProfile(latency=LATENCY, token_latency=TOKEN_LATENCY)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, _, runner = run_plan(write_plan(tmp_path, models=[chat("c", sim.url, stream=True)], datasets=[gsm_dataset("d", data)]))
    assert code == 0
    out = tmp_path / "report.html"
    assert main(["report", str(runner.workdir.root), "-o", str(out)]) == 0
    summary = json.loads(re.search(r'id="report-data">(.*?)</script>', out.read_text()).group(1))  # type: ignore[union-attr]
    c = summary["latency"]["c"]
    assert c["streamed"] == 24 and LATENCY * 0.99 <= c["ttft"]["p50"] < c["latency"]["p50"] and c["itl"]["p50"] >= TOKEN_LATENCY * 0.5
