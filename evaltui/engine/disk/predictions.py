"""The final predictions file (SPEC §6): merged from a pair's checkpoints when its shards end,
written back as checkpoint lines when only it survives, and read back (streamed) by the scorer
and the details view.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from evaltui import fastjson
from evaltui.engine.disk.checkpoint import ANY_SIZE, ENTRY_HEAD, LINE_BYTES, LineIndex
from evaltui.engine.disk.units import sample_keys
from evaltui.failure import ErrorKind, error_record
from evaltui.fsutil import atomic_write_bytes, atomic_writer, json_bytes, open_regular, read_json

if TYPE_CHECKING:
    from evaltui.engine.disk.workdir import StatusWriter

class DoneFiles(NamedTuple):
    """A dataset's `done` files (engine/run/ending.py), made in the run's process, or in its worker
    process (engine/worker.py: it pickles) left under temporary names the run puts in place: its
    predictions (merge_checkpoints with its arguments), then its last shard's status
    (StatusWriter.write's arguments)."""

    merge: Callable[..., int]
    status: tuple[Any, ...]
    fields: dict[str, Any]

    def write(self, statuses: StatusWriter, replace: Callable[[str, Path], None] = os.replace) -> None:
        self.merge(replace=replace)
        statuses.write(*self.status, **self.fields, replace=replace)


# An epoch with no line when the predictions are merged (it cannot be: a dataset ends `done`
# only once every (sample, epoch) has one; this keeps a hand-edited checkpoint readable).
MISSING_EPOCH = error_record(ErrorKind.MISSING, "no answer for this epoch")
#: The largest predictions file read whole (another tool's layout, a code_exec dataset); larger
#: ones are streamed, as evaltui writes them.
WHOLE_BYTES = 1 << 30


def merge_checkpoints(
    paths: list[Path], total: int, out: Path, *, epochs: int = 1, selection: Sequence[int] | None = None, held: Mapping[Path, bytes] | None = None,
    replace: Callable[[str, Path], None] = os.replace,
) -> int:
    """Write the final predictions file from the shards' checkpoints, streaming, in index order.

    One epoch: each line's bytes are copied with the `index` key dropped. Several: a sample's
    lines are parsed and joined into one entry (see _joined). `selection`: the indices to write
    (a --samples run); all of 0..total-1 by default. `held`: checkpoints whose bytes are at hand
    (a small dataset's, Checkpoint.kept): when every one is, the file is written in one go, as
    10,000 datasets of a few samples each spent a tenth of the engine's time in their merges.
    Returns the entries written. `replace` puts the file in place (atomic_writer's).
    """
    with LineIndex(paths, total, epochs=epochs, held=held) as lines:
        if held and all(p in held for p in lines.paths):
            entries = list(_entries_of(lines, total, epochs, selection))
            atomic_write_bytes(out, b"{%s\n}\n" % b",".join(entries), replace=replace)
            return len(entries)
        written = 0
        with atomic_writer(out, replace=replace) as w:
            w.write(b"{")
            for entry in _entries_of(lines, total, epochs, selection):
                w.write(b"," + entry if written else entry)
                written += 1
            w.write(b"\n}\n")
        return written


def _entries_of(lines: LineIndex, total: int, epochs: int, selection: Sequence[int] | None) -> Iterator[bytes]:
    """The predictions file's entries (`\\n  "3": {…}`), in index order."""
    for index in range(total) if selection is None else selection:
        if epochs == 1:
            line = lines.line(index)
            value = None if line is None else _without_index(line)
        else:
            value = _joined([lines.line(key) for key in sample_keys(index, epochs)])
        if value is not None:
            yield b'\n  "%d": %s' % (index, value)


def _without_index(line: bytes) -> bytes:
    """A one-epoch line as a predictions entry: its bytes without the `index` key."""
    m = ENTRY_HEAD.match(line)
    if m is not None and m.group(2) is None:
        return b"{" + line[m.end() :]
    entry = fastjson.loads(line)
    entry.pop("index", None)
    entry.pop("epoch", None)
    return json_bytes(entry)


def _joined(lines: list[bytes | None]) -> bytes | None:
    """One sample's epochs as one predictions entry: `prediction` (and `error`) are epoch 0's, as
    a one-epoch entry has them; `predictions` lists every epoch's answer in epoch order and, when
    one failed, `errors` every epoch's error (null where it succeeded). None: no epoch has a line."""
    if all(line is None for line in lines):
        return None
    entries = [None if line is None else fastjson.loads(line) for line in lines]
    known = next(e for e in entries if e is not None)
    first = entries[0] or {}
    joined: dict[str, Any] = {"origin_prompt": known.get("origin_prompt", ""), "prediction": first.get("prediction", ""), "gold": known.get("gold", "")}
    if first.get("error") is not None or entries[0] is None:
        joined["error"] = first.get("error") or MISSING_EPOCH
    joined["predictions"] = [e.get("prediction", "") if e else "" for e in entries]
    errors = [(e.get("error") if e else MISSING_EPOCH) for e in entries]
    if any(e is not None for e in errors):
        joined["errors"] = errors
    return json_bytes(_with_turns(joined, entries))


def _with_turns(joined: dict[str, Any], entries: list[Any]) -> dict[str, Any]:
    """A conversation's joined entry keeps epoch 0's `turns` (as `prediction`) and every epoch's
    under `epoch_turns` (as `predictions`)."""
    if any(e is not None and "turns" in e for e in entries):
        joined["turns"] = (entries[0] or {}).get("turns", [])
        joined["epoch_turns"] = [e.get("turns", []) if e else [] for e in entries]
    return joined


def read_predictions(path: Path) -> list[dict[str, Any]] | None:
    return _entries(read_json(path, WHOLE_BYTES))


def _entries(data: Any) -> list[dict[str, Any]] | None:
    """A predictions file's parsed object as its entries in index order; None when it is none."""
    if not isinstance(data, dict):
        return None
    return [{"index": int(k), **v} for k, v in sorted(data.items(), key=lambda kv: int(kv[0]))]


def predictions_to_checkpoint(predictions: Path, checkpoint: Path) -> None:
    """Write a final predictions file back as checkpoint lines (atomically: all or nothing); an
    entry of several epochs becomes a line per epoch again."""
    with atomic_writer(checkpoint) as w:
        for entry in iter_predictions(predictions):
            for line in _epoch_lines(entry):
                w.write(json_bytes(line) + b"\n")


def _epoch_lines(entry: dict[str, Any]) -> list[dict[str, Any]]:
    answers = entry.get("predictions")
    if not isinstance(answers, list):
        return [entry]
    errors = entry.get("errors")
    errors = errors if isinstance(errors, list) and len(errors) == len(answers) else [None] * len(answers)
    turns = entry.get("epoch_turns")
    turns = turns if isinstance(turns, list) and len(turns) == len(answers) else None
    lines = []
    for epoch, (answer, error) in enumerate(zip(answers, errors, strict=True)):
        if error == MISSING_EPOCH:
            continue  # never answered: left to run
        line: dict[str, Any] = {"index": entry["index"], **({"epoch": epoch} if epoch else {})}
        line.update(origin_prompt=entry.get("origin_prompt", ""), prediction=answer, gold=entry.get("gold", ""))
        if error is not None:
            line["error"] = error
        if turns is not None:
            line["turns"] = turns[epoch]
        lines.append(line)
    return lines


# Bytes of predictions file above which it is streamed. Whole is ~20 % faster to parse, but its
# objects take ~6× the file's size: above 1 MiB the memory would follow the dataset's size.
STREAM_ABOVE = 1024 * 1024
_PREDICTION_LINE = re.compile(rb'^  "(\d+)": (\{.*\}),?$')


def iter_predictions(path: Path) -> Iterator[dict[str, Any]]:
    """The final predictions file's entries in index order, streamed in batches.

    Files evaltui wrote hold one entry per line; any other valid layout (a file written by
    another tool) is read whole instead. ValueError/OSError when the file is unusable.
    """
    yielded = False
    entries: list[dict[str, Any]] | None = None
    with open_regular(path, ANY_SIZE) as f:
        # Small files parse fastest whole (one C call), read from this open file: opening it
        # again cost a scoring of three samples as much as parsing them. Only large ones stream.
        if os.fstat(f.fileno()).st_size <= STREAM_ABOVE:
            whole = f.read(STREAM_ABOVE + 1)
            if len(whole) <= STREAM_ABOVE:  # (else it grew meanwhile: read as any file below)
                try:
                    data = fastjson.loads(whole)
                except ValueError:
                    data = None  # as read_json has it
                entries = _entries(data)
                if entries is None:
                    raise ValueError(f"{path.name}: not a JSON object of predictions")
        elif f.readline(LINE_BYTES).rstrip() == b"{":
            batch: list[dict[str, Any]] = []
            while raw := f.readline(LINE_BYTES):
                line = raw.rstrip(b"\r\n")
                if line == b"}":
                    yield from batch
                    return
                m = _PREDICTION_LINE.match(line)
                if m is None:
                    if yielded:
                        raise ValueError(f"{path.name}: malformed line in the predictions file")
                    break  # another layout: read it whole below
                batch.append({"index": int(m.group(1)), **fastjson.loads(m.group(2))})
                if len(batch) >= 256:
                    yielded = True
                    yield from batch
                    batch = []
            else:
                raise ValueError(f"{path.name}: truncated predictions file")
    if entries is None:
        entries = read_predictions(path)
    if entries is None:
        raise ValueError(f"{path.name}: not a JSON object of predictions")
    yield from entries
