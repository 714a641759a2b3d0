"""The per-sample log: what happened to every (sample, epoch), one JSON line each, in the work dir.

    <work_dir>/logs/samples/<model>/<dataset>[_<n>].jsonl      one file per shard, like the checkpoints

A line is written when the unit's inference ends, beside its checkpoint line and through the
same append-only writer (Checkpoint: deferred to the end of the loop turn, torn last line cut
off when reopened, skipped when read). It holds the inference facts, known then:

    {"index": 3, "epoch": 1, "time": 1764950000.123, "took": 2.41, "prompt": "...", "system": "...",
     "attempts": [[1764950000.124, 1.2, 503, "http"], [1764950001.5, 0.9, 200, "ok"]],
     "tries": 2, "answer": "...", "error": {...}, "usage": {"prompt_tokens": 31, "completion_tokens": 12}}

(`epoch` only after epoch 0; `system`, `tries` (whole tries, when more than one), `error`,
`usage` and `ppl` only when there is one.) An attempt is [start (Unix time), seconds, HTTP
status or null, outcome: "ok" or its error class] with a fifth item, the replica, when a model
has several. What scoring decides later — the extracted answer, right or wrong, the reduced
score — is not written here a second time: it is in the result file's details, and readers
(`evaltui show`, the export, the details screen) join the two by (index, epoch). A unit tried
in several runs (it failed, then a re-run answered it) has a line per run; the last one is its
record. `[run] sample_log = false` writes none.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evaltui import fastjson
from evaltui.backends import Trace
from evaltui.engine.checkpoint import LineIndex, scan_checkpoint


def record(entry: dict[str, Any], trace: Trace | None, system: str, tries: int, started: float, took: float) -> dict[str, Any]:
    """The log line of a unit whose checkpoint entry is `entry` (once per request: kept lean)."""
    epoch = entry.get("epoch")
    line: dict[str, Any] = {"index": entry["index"], "epoch": epoch} if epoch else {"index": entry["index"]}
    line["time"] = round(started, 3)
    line["took"] = round(took, 4)
    line["prompt"] = entry["origin_prompt"]
    if system:
        line["system"] = system
    line["attempts"] = trace.attempts if trace is not None else ()  # tuples: arrays in JSON
    if tries > 1:
        line["tries"] = tries
    line["answer"] = entry["prediction"]
    if "error" in entry:
        line["error"] = entry["error"]
    if trace is not None and (trace.prompt_tokens or trace.completion_tokens):
        line["usage"] = {"prompt_tokens": trace.prompt_tokens, "completion_tokens": trace.completion_tokens}
    if "ppl" in entry:
        line["ppl"] = entry["ppl"]
    return line


def latest_records(paths: list[Path], total: int, epochs: int, selection: Iterator[int] | None = None) -> Iterator[dict[str, Any]]:
    """Each unit's last record, in (index, epoch) order, streamed: the files are indexed (a few
    bytes per unit), then read a line at a time. Torn or foreign lines are skipped."""
    with LineIndex(paths, total, epochs=epochs, latest=True) as lines:
        for index in range(total) if selection is None else selection:
            for epoch in range(epochs):
                raw = lines.line(index * epochs + epoch)
                if raw is None:
                    continue
                try:
                    data = fastjson.loads(raw)
                except ValueError:
                    continue
                if isinstance(data, dict):
                    yield data


def records_of(paths: list[Path], wanted: set[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
    """The last record of each wanted (index, epoch), for a view that shows a few of them."""
    where: dict[tuple[int, int], tuple[Path, int]] = {}
    for path in paths:
        for index, epoch, _, offset in scan_checkpoint(path):
            if (index, epoch) in wanted:
                where[(index, epoch)] = (path, offset)
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for key, (path, offset) in where.items():
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = fastjson.loads(f.readline())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            found[key] = data
    return found
