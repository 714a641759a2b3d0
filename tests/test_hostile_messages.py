"""What a hostile server's words can do once they are a failure message (RELIABILITY.md §9): be
huge, carry the key, carry terminal escapes, or come in an error reply too large to read.

Each runs the real command line in-process (`cli.main(... --no-ui)`) against a loopback server
written here and reads what the user gets: the lines printed, logs/run.log, logs/failures.jsonl
and the checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hostile import LoopbackServer, RawServer
from planmaker import lightllm, write_jsonl, write_plan
from workfiles import failure_log

from evaltui.cli import main
from evaltui.redaction import RUN

pytestmark = pytest.mark.reliability

KEY_VAR = "EVALTUI_HOSTILE_MESSAGE_KEY"
KEY = "sk-proj-Hostile0123456789abcdefXYZ"
ROWS = [{"question": f"Q{i}: what is 6 * 7?", "answer": "#### 42"} for i in range(4)]
#: The longest failure message a user may see anywhere: a server's words are cut well before.
MESSAGE_BOUND = 2000


def _plan(tmp_path: Path, base: str, path: str = "/generate", **model: Any) -> Path:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    ds = {"abbr": "d", "path": str(data), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "gsm8k"}}
    m = {**lightllm("m", base, retry=0, max_workers=1, api_key_env=KEY_VAR), "url": f"{base}{path}", **model}
    return write_plan(tmp_path, models=[m], datasets=[ds])


def _run(tmp_path: Path, plan: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    monkeypatch.setenv(KEY_VAR, KEY)
    main([str(plan), "--no-ui"])
    out = capsys.readouterr()
    return out.out + out.err, tmp_path / "out"


def _key_pieces() -> set[str]:
    return {KEY[i : i + RUN] for i in range(len(KEY) - RUN + 1)}


def test_a_huge_transport_error_is_cut_and_the_key_in_it_masked(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A Content-Length shorter than the body: the rest (the key, then 128 kB) is read as the next
    reply's status line, which aiohttp quotes whole in its error."""
    body = b'{"generated_text": ["ok 42"]}'
    garbage = b"Authorization: Bearer " + KEY.encode() + b" " + b"x" * 2**17

    def lying(request: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body + garbage

    with RawServer(lying) as srv:
        printed, wd = _run(tmp_path, _plan(tmp_path, srv.url), capsys, monkeypatch)
    failures = failure_log(wd)
    assert failures and all(f["type"] == "connection" for f in failures), failures
    assert all(len(f["message"]) <= MESSAGE_BOUND for f in failures), [len(f["message"]) for f in failures]
    assert "malformed HTTP reply" in failures[0]["message"] and "[redacted]" in failures[0]["message"]
    files = [wd / "logs" / "failures.jsonl", wd / "logs" / "run.log", *sorted((wd / "predictions" / "m").glob("tmp_*.jsonl"))]
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not any(piece in text for piece in _key_pieces()), path
        assert max(len(line) for line in text.splitlines()) <= MESSAGE_BOUND + 200, path
    assert len((wd / "logs" / "failures.jsonl").read_bytes()) < 4 * MESSAGE_BOUND * len(failures)
    assert not any(piece in printed for piece in _key_pieces())


def test_terminal_escapes_in_a_servers_message_reach_no_terminal_and_no_log(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Set the window title, colour, erase the line: shown as escapes, never sent to a terminal raw."""
    hostile = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m\x1b[2K\rerased\x9b1m done"

    async def error(request: web.Request) -> web.StreamResponse:
        return web.json_response({"error": {"message": hostile}}, status=500)

    with LoopbackServer({"/generate": error}) as srv:
        printed, wd = _run(tmp_path, _plan(tmp_path, srv.url), capsys, monkeypatch)
    log = (wd / "logs" / "run.log").read_text(encoding="utf-8")
    for text in (printed, log):
        assert "\\x1b]0;pwned\\x07\\x1b[31mred" in text, text
        assert not any(ch in text for ch in "\x1b\x07\x9b\r"), text
    assert json.loads((wd / "logs" / "failures.jsonl").read_text().splitlines()[0])["message"].startswith("\x1b]0;pwned")  # the data, as sent


def test_an_error_reply_too_large_to_read_is_judged_by_its_status(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A 503 (with Retry-After) whose body is over max_reply_bytes is retried like any 503; a 400's
    is failed as a 400; only a 2xx too large is `reply-too-large`."""
    seen: dict[str, int] = {}

    async def busy_then_good(request: web.Request) -> web.StreamResponse:
        prompt = (await request.json())["inputs"]
        seen[prompt] = seen.get(prompt, 0) + 1
        if seen[prompt] == 1:
            return web.Response(status=503, body=b"x" * 4096, headers={"Retry-After": "0"})
        return web.json_response({"generated_text": ["The answer is 42"]})

    async def refused(request: web.Request) -> web.StreamResponse:
        return web.Response(status=400, body=b"y" * 4096)

    with LoopbackServer({"/generate": busy_then_good, "/bad/generate": refused}) as srv:
        plan = _plan(tmp_path, srv.url, retry=2, max_reply_bytes=1024)
        printed, wd = _run(tmp_path, plan, capsys, monkeypatch)
        assert "scored, accuracy = 100.00" in printed, printed
        assert sorted(seen.values()) == [2] * len(ROWS)
        bad = tmp_path / "bad"
        bad.mkdir()
        plan = _plan(bad, srv.url, "/bad/generate", retry=2, max_reply_bytes=1024)
        _, wd = _run(bad, plan, capsys, monkeypatch)
        asked = srv.requests["/bad/generate"]
    failures = failure_log(wd)
    assert [(f["type"], f["status"], f["attempts"]) for f in failures] == [("http", 400, 1)] * len(ROWS), failures
    assert "max_reply_bytes" in failures[0]["message"] and asked == len(ROWS)
