"""What the benchmark tests share: the reference fixtures, the shared datasets, and a loopback
server that records every request body it is sent (OpenAI completions and chat, LightLLM).

The server is not evaltui's simulator: what it records is exactly what evaltui put on the wire.
It answers completions with `reply` and, for a log-likelihood request (echo with logprobs), gives
each whitespace-attached piece of the prompt the log-prob `logprob(text, piece_start)` says.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "benchmarks"
SHARED = REPO.parent / "shared" / "datasets"
_PIECES = re.compile(r"\s*\S+|\s+")


def reference(harness: str, entry: str) -> dict[str, Any]:
    """tests/fixtures/benchmarks/<harness>/<entry>.json (made by running the reference once)."""
    path = FIXTURES / harness / f"{entry}.json"
    if not path.is_file():
        pytest.skip(f"no reference fixture {path.relative_to(REPO)} yet (tests/fixtures/benchmarks/make_fixtures.py makes it)")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def shared(*parts: str) -> Path:
    """A file or folder of ../shared/datasets (skipped where the checkout has none, as in CI's clean clone)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared datasets sit beside the repo on the development machines only)")
    return path


def pieces(text: str) -> list[str]:
    return _PIECES.findall(text)


class Recorder(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.reply: Callable[[dict[str, Any]], str] = lambda body: "I don't know."
        self.logprob: Callable[[str, int], float] = lambda text, start: -1.0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def sent(self, suffix: str) -> list[dict[str, Any]]:
        with self.lock:
            return [b for p, b in self.bodies if p.endswith(suffix)]


class _Handler(BaseHTTPRequestHandler):
    server: Recorder

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        with self.server.lock:
            self.server.bodies.append((self.path, body))
        if self.path.endswith("/chat/completions"):
            text = self.server.reply(body)
            self._send({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
        elif self.path.endswith("/completions"):
            self._send({"choices": [self._completion(body)]})
        else:
            self._send(self._lightllm(body))

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["prompt"]
        if not (body.get("echo") and body.get("logprobs")):
            return {"index": 0, "text": self.server.reply(body), "logprobs": None, "finish_reason": "stop"}
        tokens, lps, offsets, at = [], [], [], 0
        for i, piece in enumerate([*pieces(prompt), " next"]):
            tokens.append(piece)
            offsets.append(at)
            lps.append(None if i == 0 else self.server.logprob(prompt, at) if at < len(prompt) else -0.1)
            at += len(piece)
        top = [None if lp is None else {t: lp} for t, lp in zip(tokens, lps, strict=True)]
        return {"index": 0, "text": prompt + " next", "finish_reason": "length",
                "logprobs": {"tokens": tokens, "token_logprobs": lps, "top_logprobs": top, "text_offset": offsets}}

    def _lightllm(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["inputs"]
        ps = pieces(prompt)
        ids = [1] + [100 + i for i in range(len(ps))]  # BOS, then a token id per piece
        starts = [sum(len(p) for p in ps[:i]) for i in range(len(ps))]
        items = [[ids[k], {str(ids[k + 1]): self.server.logprob(prompt, starts[k])}] for k in range(len(ps))]
        return {"generated_text": [self.server.reply(body)], "prompt_token_ids": ids, "prompt_logprobs": items,
                "prompt_tokens": len(ids), "count_output_tokens": 1}

    def _send(self, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return


@contextmanager
def recorder() -> Iterator[Recorder]:
    srv = Recorder()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def models_at(srv: Recorder, *types: str) -> list[dict[str, Any]]:
    """One model of each type at the recorder, one request at a time (so bodies come in sample order)."""
    out = []
    for t in types:
        url = f"{srv.base}/{t}/generate" if t == "lightllm" else f"{srv.base}/{t}/v1"
        model: dict[str, Any] = {"abbr": t, "type": t, "url": url, "max_workers": 1, "retry": 0, "timeout": 30.0}
        if t != "lightllm":
            model["model"] = t
        out.append(model)
    return out


class Task(NamedTuple):
    """One reference task of a fixture (a grouped entry's part), as the tests read it."""

    name: str  # lm-eval's task name
    part: str  # the entry's part it is ("" for an ungrouped entry)
    n_shot: int
    items: list[dict[str, Any]]
    verdicts: list[dict[str, Any]]


def tasks_of(fixture: dict[str, Any]) -> list[Task]:
    from evaltui.benchmarks import lookup

    entry = lookup(fixture["entry"])
    out = []
    for name, task in fixture["tasks"].items():
        part = max((p for p in entry.parts if p in name), key=len, default="")
        out.append(Task(name, part, int(task["n_shot"]), task["items"], task["verdicts"]))
    return out


def local_copy(fixture: dict[str, Any]) -> Path:
    """The copy the reference read: a folder of ../shared/datasets, or one of hub/ here (the Hub's layout)."""
    first = str(next(iter(fixture["data"]["local"].values()))).split(" ")[0]
    if first.startswith("hub/"):
        org, name = first.split("/")[1:3]
        return FIXTURES / "hub" / org / name
    return shared(first.split("/")[0])


def dataset_table(fixture: dict[str, Any], task: Task, **keys: Any) -> dict[str, Any]:
    """The plan's [[datasets]] table that asks evaltui for what the reference rendered for `task`."""
    from evaltui.benchmarks import lookup

    entry = lookup(fixture["entry"])
    table: dict[str, Any] = {"abbr": (task.part or entry.name)[:90], "benchmark": entry.name, "path": str(local_copy(fixture)),
                             "num_fewshot": task.n_shot, "limit": len(task.items)}
    split = str(fixture["data"].get("eval_split", entry.split)).split(" ")[0]
    if split != entry.split:
        table["split"] = split
    if task.part:
        table["subsets"] = [task.part]
    return {**table, **keys}
