"""What a streamed request costs the client, against a whole one: `stream = true` or not, the
same run, interleaved.

    python bench/stream_cpu.py                      # N = 20,000, C = 64, 3 rounds, LightLLM and OpenAI chat
    python bench/stream_cpu.py --n 5000 --rounds 2  # quicker look

Each round runs `evaltui PLAN --no-ui` twice against the simulator (latency 0, answers of ~20
tokens, the simulator streaming one event per token): whole replies, then streamed ones, and
prints each run's client CPU per request (the evaltui process's own rusage) and what the
streamed one costs more per request and per event. The floor is the whole reply's: the SSE
frames are the only work a streamed request adds (one event per token, each decoded, its JSON
parsed and its text kept), and the extra divided by the events is what each costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import tempfile
from pathlib import Path

import workload as w

ANSWER = "Let us add {i} and {j} step by step: {i} plus {j} makes {k}, so the answer is {k}.\n#### {k}"


def write_data(folder: Path, n: int) -> tuple[Path, Path, int]:
    """(data, answer key, the tokens of an answer as the simulator counts them)."""
    from evaltui.sim.answers import tokenize

    data, key = folder / "data.jsonl", folder / "key.jsonl"
    with open(data, "w") as d, open(key, "w") as k:
        for i in range(n):
            q, a = w.question(i), ANSWER.format(i=i, j=i + 7, k=2 * i + 7)
            d.write(json.dumps({"question": q, "answer": a}) + "\n")
            k.write(json.dumps({"prompt": q, "answer": a}) + "\n")
    return data, key, len(tokenize(ANSWER.format(i=100, j=107, k=207)))


def plan(folder: Path, data: Path, url: str, c: int, kind: str, stream: bool) -> Path:
    path = folder / f"{kind}-{'stream' if stream else 'whole'}.toml"
    chat = f'type = "openai-chat"\nurl = "{url}/{w.MODEL}/v1"\nmodel = "{w.MODEL}"'
    where = f'type = "lightllm"\nurl = "{url}/{w.MODEL}/generate"' if kind == "lightllm" else chat
    path.write_text(f"""
[run]
work_dir = "{folder / 'out'}"
sample_log = false

[[models]]
abbr = "{w.MODEL}"
{where}
max_workers = {c}
stream = {'true' if stream else 'false'}
generation_kwargs = {{ max_new_tokens = 64 }}

[[datasets]]
abbr = "arith"
path = "{data}"
prompt = "{{question}}"
target = "{{answer}}"
[datasets.evaluator]
type = "gsm8k"
""")
    return path


def parse_floor(kind: str, repeat: int = 5000) -> tuple[float, int]:
    """(µs, events) to read one answer's stream as the simulator sends it — its events split
    into lines and decoded (httpx-sse), their JSON parsed, their text kept — with no network:
    what the SSE frames of one request cost by themselves."""
    import time

    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    from evaltui.backends.lightllm import TokenStream
    from evaltui.backends.openai import _ChatStream
    from evaltui.sim.answers import tokenize
    from evaltui.sim.config import SimConfig
    from evaltui.sim.lightllm import _token_events
    from evaltui.sim.openai import OpenAIDialect

    text = ANSWER.format(i=100, j=107, k=207)
    if kind == "lightllm":
        events = _token_events(tokenize(text), 12, "stop").events or []
        make = TokenStream
    else:
        head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        chunks = [dict(head, choices=[{"index": 0, "delta": {"content": p}, "logprobs": None, "finish_reason": None}]) for p in tokenize(text)]
        chunks += [dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])]
        chunks += [dict(head, choices=[], usage={"prompt_tokens": 12, "completion_tokens": 20})]
        events = OpenAIDialect(SimConfig())._sse(chunks).events or []
        make = _ChatStream
    body = b"".join(events)
    t0 = time.perf_counter()
    for _ in range(repeat):
        stream, lines, decoder = make(time.monotonic), SSELineDecoder(), SSEDecoder()
        for line in [*lines.decode(body.decode()), ""]:
            sse = decoder.decode(line)
            if sse is not None and sse.data:
                stream.event(sse.data, 0.0)
        stream.answer()
    return 1e6 * (time.perf_counter() - t0) / repeat, len(events)


async def _raw(url: str, body: bytes, n: int, c: int, stream: bool) -> None:
    import aiohttp

    sem = asyncio.Semaphore(c)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as session:

        async def one() -> None:
            async with sem, session.post(url, data=body, headers={"content-type": "application/json"}) as resp:
                if stream:
                    async for _ in resp.content.iter_any():
                        pass
                else:
                    await resp.read()

        await asyncio.gather(*(one() for _ in range(n)))


def transport_floor(url: str, n: int, c: int) -> tuple[float, float]:
    """(whole, streamed) CPU ms per request of bare aiohttp reading the same replies and doing
    nothing with them: what the frames cost on the wire, before any of evaltui's work."""
    out = []
    for stream in (False, True):
        body = json.dumps({"inputs": w.question(5), "parameters": {"max_new_tokens": 64}}).encode()
        before = resource.getrusage(resource.RUSAGE_SELF)
        asyncio.run(_raw(f"{url}/{w.MODEL}/generate{'_stream' if stream else ''}", body, n, c, stream))
        after = resource.getrusage(resource.RUSAGE_SELF)
        out.append(1000 * (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / n)
    return out[0], out[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--c", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", nargs="+", default=["lightllm", "openai-chat"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="evaltui-stream-") as tmp:
        folder = Path(tmp)
        data, key, _ = write_data(folder, args.n)
        sim = w.start_sim(key, 0.0, 0.0, 0, 1.0)
        try:
            for kind in args.kinds:
                cpu: dict[bool, list[float]] = {False: [], True: []}
                for r in range(args.rounds):
                    for stream in (False, True):
                        argv = [*w.EVALTUI, str(plan(folder, data, sim.url, args.c, kind, stream)), "--no-ui", "--fresh"]
                        m, _ = w.run_client(f"{kind}-{stream}", argv, sim, args.n, args.c, 0.0)
                        cpu[stream].append(m.cpu_ms_per_request)
                        print(f"{kind:<12} round {r + 1}  {'streamed' if stream else 'whole   '}  wall {m.wall:6.2f} s  CPU {m.cpu:6.2f} s  "
                              f"{m.cpu_ms_per_request:.3f} ms/request  requests {m.requests}", flush=True)
                whole, streamed = statistics.median(cpu[False]), statistics.median(cpu[True])
                floor, events = parse_floor(kind)
                if kind == "lightllm":
                    raw = [transport_floor(sim.url, args.n, args.c) for _ in range(args.rounds)]
                    whole_raw, stream_raw = statistics.median(r[0] for r in raw), statistics.median(r[1] for r in raw)
                    print(f"{'bare aiohttp':<12} the same replies read and dropped: whole {whole_raw:.3f} ms, streamed {stream_raw:.3f} ms per request: "
                          f"+{1000 * (stream_raw - whole_raw):.0f} µs for the frames on the wire")
                print(f"{kind:<12} median CPU per request: whole {whole:.3f} ms, streamed {streamed:.3f} ms (x{streamed / whole:.2f}): "
                      f"+{1000 * (streamed - whole):.0f} µs for its {events} events ({1000 * (streamed - whole) / events:.1f} µs an event); "
                      f"reading those events alone, no network: {floor:.0f} µs ({floor / events:.1f} µs an event)")
        finally:
            sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
