"""The eval loop against a real loopback HTTP server that is not evaltui's simulator: an
OpenAI-style /v1/chat/completions written here with http.server, whose first requests fail.
What it sees (seeds per epoch, how often each prompt came) is what the eval loop sent."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from planmaker import gsm_dataset, of_type, run_plan, write_jsonl, write_plan

from evaltui.engine.disk.records import WorkDirView
from evaltui.engine.stream import events as ev

FAIL_FIRST = 3  # requests of each prompt answered with a 503 before it is answered


class _Server(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Chat)
        self.lock = threading.Lock()
        self.seen: Counter[str] = Counter()
        self.seeds: list[Any] = []


class _Chat(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        prompt = body["messages"][-1]["content"]
        with self.server.lock:
            self.server.seen[prompt] += 1
            tries = self.server.seen[prompt]
            self.server.seeds.append(body.get("seed"))
        if tries <= FAIL_FIRST:
            self._reply(503, {"error": {"message": "warming up", "type": "server_error"}})
            return
        # right when the seed is even (or absent): a sampled model, as far as the eval loop can tell
        number = int(prompt.split()[-1].rstrip("?"))
        answer = number if (body.get("seed") or 0) % 2 == 0 else number + 1
        self._reply(200, {"choices": [{"message": {"role": "assistant", "content": f"#### {answer}"}}], "usage": {"prompt_tokens": 9, "completion_tokens": 3}})

    def _reply(self, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_epochs_retries_and_the_log_against_a_server_that_is_not_the_simulator(tmp_path: Path, server: _Server) -> None:
    rows = [{"question": f"What is {n}?", "answer": f"#### {n}"} for n in range(5)]
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    model = {"abbr": "m", "type": "openai-chat", "url": url, "model": "m", "max_workers": 1, "retry": 1, "backoff": 0.0, "timeout": 10.0,
             "generation_kwargs": {"temperature": 0.7, "max_new_tokens": 16}}
    ds = gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), epochs=4, retry_on_error=1,
                     evaluator={"type": "gsm8k", "reducer": "pass_at_k", "k": [1, 4]})
    code, events, runner = run_plan(write_plan(tmp_path, models=[model], datasets=[ds]))
    assert code == 0
    # each prompt: its first unit's try 1 (two 503s) sends it to the back of the queue (issue 23);
    # the next unit, epoch 1, gets the third 503 and then its answer; the rest answer at once, and
    # epoch 0's try 2 comes round at the end and is answered
    assert set(server.seen.values()) == {FAIL_FIRST + 1 + 3}
    assert Counter(server.seeds) == Counter({None: 3 * 5, 1: 2 * 5, 2: 5, 3: 5})  # epoch 0 sends no seed
    assert len(of_type(events, ev.SampleRetried)) == 5
    scored = of_type(events, ev.DatasetScored)[0]
    assert (scored.metric, scored.score, scored.extra) == ("pass@1", 50.0, (("pass@4", 100.0),))  # epochs 0 and 2 right
    records = list(WorkDirView(runner.workdir.root).records("m", "d"))
    first = records[0]
    assert (first["index"], first["epoch"], first["tries"]) == (0, 0, 2)
    assert [(a["status"], a["outcome"]) for a in first["attempts"]] == [(503, "http")] * 2 + [(200, "ok")]  # both tries' attempts
    assert first["usage"] == {"prompt_tokens": 9, "completion_tokens": 3}
    assert [r["correct"] for r in records[:4]] == [True, False, True, False]
