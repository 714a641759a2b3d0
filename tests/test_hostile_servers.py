"""What a broken or hostile model server can do, through a whole run (RELIABILITY.md §2, §9).

One run of a plan whose models each point at one misbehaviour of a loopback server written here
(tests/hostile.py): a reply trickled a byte every 0.5 s, HTML instead of JSON, invalid UTF-8,
an event stream of 100,000 chunks, a redirect to another host, replies missing their fields,
50 MB replies (declared, chunked, or a gzip bomb), a certificate that has expired. The run must
end, the good model be scored, and every other sample fail with a reason a user can act on —
retried only where another try can help — while no request follows a redirect.
"""

from __future__ import annotations

import functools
import json
import ssl
import zlib
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiohttp import web
from hostile import LoopbackServer, stream
from planmaker import chat, lightllm, of_type, run_plan, write_jsonl, write_plan
from workfiles import failure_log

from evaltui.engine.stream import events as ev

pytestmark = pytest.mark.reliability

ROWS = [{"question": f"Q{i}: what is 6 * 7?", "answer": "#### 42"} for i in range(2)]
MB = 2**20
BIG = 50 * MB


def _json(obj: Any) -> web.Response:
    return web.json_response(obj)


async def good(request: web.Request) -> web.StreamResponse:
    return _json({"generated_text": ["The answer is 42"]})


async def trickle(request: web.Request) -> web.StreamResponse:
    body = json.dumps({"generated_text": ["The answer is 42"]}).encode()
    return await stream(request, (body[i : i + 1] for i in range(len(body))), length=len(body), pause=0.5)


async def html(request: web.Request) -> web.StreamResponse:
    return web.Response(text="<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1>nginx</body></html>", content_type="text/html")


async def bad_utf8(request: web.Request) -> web.StreamResponse:
    return web.Response(body=b'{"generated_text": ["caf\xe9 \xff\xfe The answer is 42"]}', content_type="application/json")


async def sse(request: web.Request) -> web.StreamResponse:
    events = (b'data: {"choices":[{"delta":{"content":"%d "}}]}\n\n' % i for i in range(100_000))
    return await stream(request, events, content_type="text/event-stream")


async def empty_choices(request: web.Request) -> web.StreamResponse:
    return _json({"id": "x", "object": "chat.completion", "choices": []})


async def null_text(request: web.Request) -> web.StreamResponse:
    return _json({"generated_text": None})


def _megabytes() -> Iterator[bytes]:
    chunk = b"x" * MB
    yield b'{"generated_text": ["'
    for _ in range(BIG // MB):
        yield chunk


async def huge_declared(request: web.Request) -> web.StreamResponse:
    return await stream(request, _megabytes(), length=BIG + 30)


async def huge_chunked(request: web.Request) -> web.StreamResponse:
    return await stream(request, _megabytes())


@functools.lru_cache(maxsize=1)
def _bomb() -> bytes:
    """50 MB of JSON in ~50 kB of gzip, compressed a megabyte at a time."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # the gzip container
    zeros = b"0" * MB
    return z.compress(b'{"generated_text": ["') + b"".join(z.compress(zeros) for _ in range(BIG // MB)) + z.compress(b'"]}') + z.flush()


async def gzip_bomb(request: web.Request) -> web.StreamResponse:
    return await stream(request, iter([_bomb()]), length=len(_bomb()), encoding="gzip")


ROUTES = {
    "/good/generate": good, "/trickle/generate": trickle, "/html/generate": html, "/utf8/generate": bad_utf8,
    "/sse/v1/chat/completions": sse, "/nochoices/v1/chat/completions": empty_choices, "/null/generate": null_text,
    "/declared/generate": huge_declared, "/chunked/generate": huge_chunked, "/bomb/generate": gzip_bomb,
}


@pytest.fixture
def expired_tls(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context whose certificate (from a CA the client trusts) expired yesterday."""
    ca = trustme.CA()
    now = datetime.now(timezone.utc)
    cert = ca.issue_cert("127.0.0.1", not_before=now - timedelta(days=30), not_after=now - timedelta(days=1))
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    return ctx, tmp_path / "ca.pem"


def _errors(work_dir: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in failure_log(work_dir):
        out.setdefault(entry["model"], []).append(entry)
    return out


def test_a_run_against_hostile_servers_ends_with_every_sample_failed_for_a_clear_reason(tmp_path: Path, expired_tls) -> None:  # type: ignore[no-untyped-def]
    tls_ctx, ca_file = expired_tls
    with LoopbackServer(ROUTES) as srv, LoopbackServer({"/generate": good}) as elsewhere, \
            LoopbackServer({"/generate": good}, tls=tls_ctx) as https:
        elsewhere_url = f"http://localhost:{elsewhere.port}/generate"  # another host name, another server

        async def redirect(request: web.Request) -> web.StreamResponse:
            return web.Response(status=307, headers={"Location": elsewhere_url})

        srv.routes["/redirect/generate"] = redirect

        def at(name: str, **kw: Any) -> dict[str, Any]:
            return {**lightllm(name, srv.url, **{"retry": 1, "max_workers": 2, **kw}), "url": f"{srv.url}/{name}/generate"}

        models = [at(name) for name in ("good", "html", "utf8", "null", "declared", "chunked", "bomb", "redirect")]
        models.append(at("trickle", retry=0, timeout=1.0))
        models += [{**chat(name, srv.url, retry=1, max_workers=2), "url": f"{srv.url}/{name}/v1"} for name in ("sse", "nochoices")]
        models.append({**lightllm("expired", https.url, retry=1), "url": f"{https.url}/generate", "ca_file": str(ca_file)})
        data = write_jsonl(tmp_path / "d.jsonl", ROWS)
        ds = {"abbr": "d", "path": str(data), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "gsm8k"}}
        plan = write_plan(tmp_path, models=models, datasets=[ds], run={"max_num_workers": len(models)})
        code, events, runner = run_plan(plan)
        asked = dict(srv.requests)
        followed = elsewhere.requests["/generate"]
    assert code == 1
    scores = {e.model: e.score for e in of_type(events, ev.DatasetScored)}
    assert scores["good"] == 100.0 and scores["utf8"] == 100.0  # an invalid byte costs a character, not the sample
    preds = json.loads(runner.workdir.predictions_file("utf8", "d").read_text(encoding="utf-8"))
    assert "caf\ufffd \ufffd\ufffd The answer is 42" == preds["0"]["prediction"]
    errors = _errors(runner.workdir.root)
    print("\n" + "\n".join(f"{m}: {es[0]['type']} {es[0]['status']} x{es[0]['attempts']}: {es[0]['message']}" for m, es in sorted(errors.items())))
    assert set(errors) == {"html", "null", "declared", "chunked", "bomb", "redirect", "trickle", "sse", "nochoices", "expired"}

    def each(model: str) -> dict[str, Any]:
        """The one reason all of the model's samples failed for."""
        entries = errors[model]
        assert len(entries) == len(ROWS), entries
        kinds = {(e["type"], e["status"], e["attempts"]) for e in entries}
        assert len(kinds) == 1, entries
        return entries[0]

    def attempts(model: str, path: str) -> int:
        return asked[path] // len(ROWS)

    e = each("trickle")  # a byte every 0.5 s never finishes within the 1 s attempt
    assert e["type"] == "timeout" and "1 s" in e["message"]
    e = each("html")  # an error page in place of JSON: retried (a proxy's page may pass), then says what came
    assert (e["type"], e["status"], e["attempts"]) == ("bad-reply", 200, 2) and "HTML" in e["message"] and "502 Bad Gateway" in e["message"]
    e = each("sse")  # an event stream nobody asked for: the same again on a retry, so failed at once
    assert (e["type"], e["attempts"]) == ("bad-reply", 1) and "event stream" in e["message"] and attempts("sse", "/sse/v1/chat/completions") == 1
    e = each("nochoices")
    assert e["type"] == "bad-reply" and "no choices" in e["message"]
    e = each("null")
    assert e["type"] == "bad-reply" and "generated_text is null" in e["message"]
    e = each("redirect")  # never followed, to this host or another
    assert (e["type"], e["status"], e["attempts"]) == ("http", 307, 1) and f"redirects to {elsewhere_url}" in e["message"]
    assert followed == 0
    for model in ("declared", "chunked", "bomb"):  # the reply cap: failed at once, the size said
        e = each(model)
        assert (e["type"], e["status"], e["attempts"]) == ("reply-too-large", 200, 1), e
        assert "max_reply_bytes" in e["message"] and attempts(model, f"/{model}/generate") == 1
    assert f"Content-Length is {BIG + 30:,} bytes" in each("declared")["message"]
    e = each("expired")  # trusted CA, expired certificate: not retried, and says so
    assert (e["type"], e["attempts"]) == ("connect", 1) and "expired" in e["message"]


#: Peak resident memory allowed for a run holding three 50 MB replies in flight (16 MiB each at most
#: under the default cap, plus the interpreter's ~50 MB): reading them whole took 460 MB.
PEAK_RSS_MB = 200


def test_three_50_mb_replies_in_flight_keep_memory_bounded_by_the_cap(tmp_path: Path) -> None:
    """Measured in a process of its own (tests/loadkid.py: the peak resident set of the run alone)."""
    import subprocess
    import sys

    with LoopbackServer({"/generate": huge_chunked}) as srv:
        data = write_jsonl(tmp_path / "d.jsonl", [*ROWS, {"question": "Q2", "answer": "#### 42"}])
        ds = {"abbr": "d", "path": str(data), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "gsm8k"}}
        plan = write_plan(tmp_path, models=[{**lightllm("m", srv.url, retry=0, max_workers=3), "url": f"{srv.url}/generate"}], datasets=[ds])
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).parent / "loadkid.py"), str(plan), str(tmp_path / "out")],
            capture_output=True, text=True, timeout=120,
        )
        asked = srv.requests["/generate"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"\nthree 50 MB replies: RSS {figures['rss_before_kb'] / 1024:.0f} MB before, peak {figures['peak_rss_kb'] / 1024:.0f} MB")
    assert asked == 3 and [e["type"] for e in failure_log(tmp_path / "out")] == ["reply-too-large"] * 3
    assert figures["peak_rss_kb"] < PEAK_RSS_MB * 1024
