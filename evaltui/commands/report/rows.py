"""A pair's records as the page's sample browser holds them: compact rows in gzip'd chunks, and
a verdict letter per row so that filtering needs no chunk opened.

A row keeps what a person reading one sample wants — the prompt or conversation, the model's
reasoning its server sent beside the answer (`reasoning_content`), the answer,
what the evaluator extracted, the gold, the verdict, a judge's reasoning, the error, attempts,
tries, tokens and time — under short keys (the page's script reads them; report.js `row`).
Rows are packed CHUNK at a time: gzip'd (the browser's own DecompressionStream opens them) and
base64'd into the page, so a 200,000-sample run is a page of some megabytes whose samples are
opened a chunk at a time, on demand.
"""

from __future__ import annotations

import base64
import gzip
from collections import Counter
from collections.abc import Iterator
from typing import Any

from evaltui import fastjson

CHUNK = 500  # rows per chunk: a page of the browser shows 50, a search opens them all in turn

RIGHT, WRONG, FAILED, UNSCORED = "r", "w", "f", "u"
TEXTS = (
    ("e", "epoch"), ("s", "system"), ("p", "prompt"), ("rc", "reasoning_content"), ("a", "answer"),
    ("x", "extracted"), ("g", "gold"), ("res", "result"), ("n", "tries"), ("l", "took"),
)
JUDGE_KEYS = ("explanation", "judge", "reasoning")  # a judge's reasoning, as a scored detail may carry it


def verdict(record: dict[str, Any]) -> str:
    if record.get("error") is not None:
        return FAILED
    correct = record.get("correct")
    return RIGHT if correct is True else WRONG if correct is False else UNSCORED


def row(record: dict[str, Any]) -> dict[str, Any]:
    """The browser's row of one record (docs/export.md's shape): keys only where there is a value."""
    out: dict[str, Any] = {"i": record.get("index"), "v": verdict(record)}
    for short, key in TEXTS:
        value = record.get(key)
        if value not in (None, "", 0):
            out[short] = value if isinstance(value, (str, int, float)) else _text(value)
    if isinstance(record.get("messages"), list):
        out["m"] = record["messages"]
    judge = next((record[k] for k in JUDGE_KEYS if record.get(k)), None)
    if judge is not None:
        out["j"] = _text(judge)
    error = record.get("error")
    if isinstance(error, dict):
        out["err"] = [error.get("type"), error.get("status"), error.get("message")]
    attempts = record.get("attempts") or []
    if attempts:
        out["t"] = [_attempt(a) for a in attempts if isinstance(a, dict)]
    usage = record.get("usage")
    if isinstance(usage, dict):
        out["u"] = [usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)]
    for key in ("ttft", "itl", "cost"):
        if isinstance(record.get(key), (int, float)):
            out[key] = record[key]
    if isinstance(record.get("scores"), dict):
        out["sc"] = record["scores"]
    if isinstance(record.get("ppl"), list):
        out["ppl"] = record["ppl"]
    return out


def _attempt(a: dict[str, Any]) -> list[Any]:
    """[seconds, HTTP status, outcome(, replica)]"""
    return [a.get("seconds"), a.get("status"), a.get("outcome"), *([a["replica"]] if a.get("replica") else [])]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else fastjson.dumps(value).decode("utf-8", "replace")


def pack(rows: list[dict[str, Any]]) -> bytes:
    """A chunk as it goes into the page: gzip (mtime 0: the same run gives the same page), base64."""
    return base64.b64encode(gzip.compress(fastjson.dumps(rows), compresslevel=6, mtime=0))


class PairRows:
    """One pair's records turned into rows, chunk by chunk, counting as they go."""

    def __init__(self) -> None:
        self.verdicts: list[str] = []
        self.counts: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()  # failed units by error class
        self.tokens = [0, 0]  # prompt and completion tokens, as the servers counted them
        self.chunks = 0

    def chunked(self, records: Iterator[dict[str, Any]]) -> Iterator[bytes]:
        """The packed chunks of `records`, each record also counted."""
        pending: list[dict[str, Any]] = []
        for record in records:
            r = row(record)
            self.verdicts.append(r["v"])
            self.counts[r["v"]] += 1
            if "err" in r:
                self.failures[str(r["err"][0])] += 1
            if "u" in r:
                self.tokens[0] += int(r["u"][0] or 0)
                self.tokens[1] += int(r["u"][1] or 0)
            pending.append(r)
            if len(pending) == CHUNK:
                yield self._packed(pending)
                pending = []
        if pending:
            yield self._packed(pending)

    def _packed(self, rows: list[dict[str, Any]]) -> bytes:
        self.chunks += 1
        return pack(rows)
