"""The per-sample log: what happened to every (sample, epoch), one JSON line each, in the work dir.

    <work_dir>/logs/samples/<model>/<dataset>[_<n>].jsonl      one file per shard, like the checkpoints

A line is written when the unit's inference ends, beside its checkpoint line and through the
same append-only writer (Checkpoint: deferred to the end of the loop turn, torn last line cut
off when reopened, skipped when read). It holds the inference facts, known then:

    {"index": 3, "epoch": 1, "time": 1764950000.123, "took": 2.41, "prompt": "...", "system": "...",
     "attempts": [[1764950000.124, 1.2, 503, "http"], [1764950001.5, 0.9, 200, "ok"]],
     "tries": 2, "answer": "...", "error": {...}, "usage": {"prompt_tokens": 31, "completion_tokens": 12}}

(`epoch` only after epoch 0; `system`, `tries` (whole tries, when more than one), `error`,
`usage` and `ppl` only when there is one; `ttft` and `itl`, a streamed answer's time to first
token and between tokens, only when the model streams; `reasoning_content`, a reasoning model's
thinking as its server sent it beside the answer (`message.reasoning_content` or `reasoning`,
streamed deltas joined), only when it sent some — never part of the `answer` evaluators score,
which keeps the reply's own `<think>…</think>` whole.) A conversation's line adds its `messages`: every
message in order, each answer with its request's usage and time (and its `reasoning_content`) —

    "messages": [{"role": "system", "content": "…"}, {"role": "user", "content": "…"},
                   {"role": "assistant", "content": "…", "took": 0.8, "usage": {…}}, {"role": "user", "content": "…"}, …]

(a self-critique's two requests marked `"kind": "critique"` / `"revision"`, a request an earlier
run answered `"earlier": true`; a conversation that failed ends with the question not answered). An attempt is [start (Unix time), seconds, HTTP
status or null, outcome: "ok" or its error class] with a fifth item, the replica, when a model
has several. What scoring decides later — the extracted answer, right or wrong, the reduced
score — is not written here a second time: it is in the result file's details, and readers
(`evaltui show`, the export, the details screen) join the two by (index, epoch). A unit tried
in several runs (it failed, then a re-run answered it) has a line per run; the last one is its
record. `[run] sample_log = false` writes none; readers take a unit the log lacks from its
checkpoint line (no attempts, tries or usage).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from evaltui import fastjson
from evaltui.backends import Trace
from evaltui.conversation import turn_messages, turns_of
from evaltui.engine.disk.checkpoint import ANY_SIZE, LINE_BYTES, LineIndex, replaces, scan_checkpoint
from evaltui.fsutil import Unreadable, open_regular


def record(
    entry: dict[str, Any], trace: Trace | None, system: str, tries: int, started: float, took: float, messages: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The log line of a unit whose checkpoint entry is `entry` (once per request: kept lean);
    a conversation's with its `messages` (Script.log_messages)."""
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
    if trace is not None and trace.reasoning is not None:
        line["reasoning_content"] = trace.reasoning
    if "error" in entry:
        line["error"] = entry["error"]
    if trace is not None and (trace.prompt_tokens or trace.completion_tokens):
        line["usage"] = {"prompt_tokens": trace.prompt_tokens, "completion_tokens": trace.completion_tokens}
    if trace is not None and trace.ttft is not None:  # streamed: the answered attempt's timings
        line["ttft"] = round(trace.ttft, 4)
        if trace.itl is not None:
            line["itl"] = round(trace.itl, 5)
    if "ppl" in entry:
        line["ppl"] = entry["ppl"]
    if "ll" in entry:
        line["ll"] = entry["ll"]
    if messages is not None:
        line["messages"] = messages
    return line


def latest_records(logs: list[Path], total: int, epochs: int, *, checkpoints: Sequence[Path] = ()) -> Iterator[dict[str, Any]]:
    """Each unit's record, in (index, epoch) order, streamed: its last log line or, for a unit
    the log lacks (run with sample_log = false, or by a version that wrote none), its checkpoint
    line in the same shape (`checkpoint_record`). The files are indexed together (a few bytes
    per unit; a checkpoint's success outranks a log's failure, as a unit answered stays
    answered), then read a line at a time. Torn or foreign lines are skipped."""
    logged = set(logs)
    with LineIndex([*checkpoints, *logs], total, epochs=epochs, latest=True) as lines:
        for key in range(total * epochs):
            raw = lines.line(key)
            if raw is None:
                continue
            try:
                data = fastjson.loads(raw)
            except ValueError:
                continue
            if isinstance(data, dict):
                yield data if lines.path(key) in logged else checkpoint_record(data)


def records_of(logs: list[Path], wanted: set[tuple[int, int]], checkpoints: Sequence[Path] = ()) -> dict[tuple[int, int], dict[str, Any]]:
    """The record of each wanted (index, epoch), as latest_records has it, for a view that shows a few."""
    logged = set(logs)
    where: dict[tuple[int, int], tuple[Path, int, bool]] = {}
    for path in [*checkpoints, *logs]:
        for index, epoch, ok, offset in scan_checkpoint(path):
            key = (index, epoch)
            if key in wanted and (key not in where or replaces(where[key][2], ok)):
                where[key] = (path, offset, ok)
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for key, (path, offset, _) in where.items():
        try:
            with open_regular(path, ANY_SIZE) as f:
                f.seek(offset)
                data = fastjson.loads(f.readline(LINE_BYTES))
        except Unreadable:
            raise
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            found[key] = data if path in logged else checkpoint_record(data)
    return found


def checkpoint_record(entry: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint line in the shape of a log record: its prompt, answer and error, no attempts."""
    record: dict[str, Any] = {"index": entry["index"], "epoch": entry.get("epoch", 0)}
    record.update(prompt=entry.get("origin_prompt", ""), answer=entry.get("prediction", ""))
    if "error" in entry:
        record["error"] = entry["error"]
    if entry.get("gold") is not None:
        record["gold"] = entry["gold"]
    turns = turns_of(entry)
    if turns:
        record["messages"] = turn_messages(turns)
    return record
