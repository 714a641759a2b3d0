"""Checkpoints and the final predictions file merged from them (SPEC §6).

A checkpoint is append-only JSONL, one line per finished sample; a kill mid-write can leave a
torn last line, which reading skips and reopening cuts off, losing only that sample. Resume
planning scans them, the shard's end merges them into the final predictions file, and the
watch-scorer and the details view read that file back.
"""

from __future__ import annotations

import asyncio
import os
import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from evaltui import fastjson
from evaltui.engine.disk.units import sample_keys, unit_key
from evaltui.failure import ErrorKind, error_record
from evaltui.fsutil import atomic_writer, json_bytes, read_json


class Checkpoint:
    """Append-only JSONL of finished samples for one shard.

    A new file starts with a `{"version": …}` line (the pair's version): if the status files
    that also carry it are lost, a changed prompt still cannot reuse these answers.

    Opened with `defer` (the event loop's `call_soon`), the lines of the samples that finish in
    one turn of the loop go out in one write at the end of that turn: at 256 requests in flight
    that is tens of lines per system call instead of one each. The engine awaits `written()`
    after each `append`, so a worker sends its next request only once its answer is on disk,
    and a kill -9 still loses no more than the requests in flight. A write that fails there (a
    full disk) is raised by `written()` to every worker whose answer it held, and by any later
    `append`, in the engine's tasks; `close` never raises (it runs where a run is put away).
    """

    def __init__(self, path: Path, version: str = ""):
        self.path = path
        self.version = version
        self._fd: int | None = None
        self._defer: Callable[[Callable[[], None]], object] | None = None
        self._pending: list[bytes] = []
        self._failed: OSError | None = None

    def open(self, defer: Callable[[Callable[[], None]], object] | None = None) -> None:
        """Open for appending, first cutting off a torn last line so the next line starts clean."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        size = os.fstat(fd).st_size
        if size:
            tail_start = max(0, size - 65536)
            while True:
                data = os.pread(fd, size - tail_start, tail_start)
                if data.endswith(b"\n"):
                    break
                cut = data.rfind(b"\n")
                if cut >= 0:
                    os.ftruncate(fd, tail_start + cut + 1)
                    break
                if tail_start == 0:
                    os.ftruncate(fd, 0)
                    break
                tail_start = max(0, tail_start - 65536)
        self._fd = fd
        self._defer = defer
        self._failed = None
        if os.fstat(fd).st_size == 0 and self.version:
            self._write(json_bytes({"version": self.version}) + b"\n")

    def append(self, entry: dict[str, Any]) -> None:
        assert self._fd is not None, "checkpoint not open"
        self._raise_failed()
        line = json_bytes(entry) + b"\n"
        if self._defer is None:
            self._write(line)
            return
        if not self._pending:
            self._defer(self._flush_deferred)
        self._pending.append(line)

    async def written(self) -> None:
        """Once the lines appended so far are on disk (the end of this loop turn); raises a
        write that failed."""
        if self._pending:
            await asyncio.sleep(0)  # queued behind the flush the first append of the turn asked for
        self._raise_failed()

    def flush(self) -> None:
        """Write the lines still held (one write), now."""
        if self._pending and self._fd is not None:
            lines, self._pending = self._pending, []
            self._write(b"".join(lines))

    def _flush_deferred(self) -> None:
        try:
            self.flush()
        except OSError as e:  # no task to raise it in here: the engine's next call raises it
            self._failed = e

    def _raise_failed(self) -> None:
        if self._failed is not None:  # for good: each worker whose answer the lost write held must stop
            raise self._failed

    def _write(self, line: bytes) -> None:
        """The whole line or nothing: a short write (disk full) is cut back off and raised."""
        assert self._fd is not None
        start = os.lseek(self._fd, 0, os.SEEK_END)
        view = memoryview(line)
        try:
            while view:
                written = os.write(self._fd, view)
                if written <= 0:
                    raise OSError(f"could not write to {self.path}")
                view = view[written:]
        except OSError:
            os.ftruncate(self._fd, start)
            raise

    def close(self) -> None:
        """Write what is held and close. Lines held here are those of workers cancelled before
        their write (a run being stopped): if this write fails too, they are asked again next run."""
        if self._fd is not None:
            self._flush_deferred()
            os.close(self._fd)
            self._fd = None
            self._pending.clear()


def checkpoint_version(path: Path) -> str:
    """The version a checkpoint was started under ("" if it has none or cannot be read)."""
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return ""
    if first.startswith(b'{"version"'):
        try:
            return str(fastjson.loads(first).get("version", ""))
        except ValueError:
            return ""
    return ""


# A checkpoint line as Checkpoint.append writes it starts `{"index":N,` (`{"index": N, ` before
# evaltui wrote compact JSON), then `"epoch":E,` for every epoch but the first. Inside a JSON
# string every quote is escaped, so `"error":{` can only be the key of a failure entry: lines
# can be classified without parsing them, which keeps resume and merge fast for millions of samples.
_ENTRY_HEAD = re.compile(rb'\{"index": ?(\d+), ?(?:"epoch": ?(\d+), ?)?')
_ERROR_KEY = re.compile(rb'"error": ?\{')


class Line(NamedTuple):
    """One complete line of a checkpoint (or of a per-sample log, which has the same head)."""

    sample: int  # its index (a tuple's own `index` method keeps that name)
    epoch: int  # 0 when the line has none (every line of a one-epoch run, every older line)
    ok: bool  # no "error": the sample succeeded
    offset: int  # where the line starts


def line_outcome(line: bytes) -> Line | None:
    """The sample, epoch and success of one complete checkpoint line (offset 0); None for a line
    that is no sample's (the version line, garbage). Lines are classified without being parsed."""
    m = _ENTRY_HEAD.match(line)
    if m is not None:
        epoch = m.group(2)
        return Line(int(m.group(1)), int(epoch) if epoch is not None else 0, _ERROR_KEY.search(line) is None, 0)
    return _parsed_outcome(line, 0)


def _parsed_outcome(line: bytes, offset: int) -> Line | None:
    try:
        entry = fastjson.loads(line)
    except ValueError:
        return None
    if isinstance(entry, dict) and isinstance(entry.get("index"), int):
        epoch = entry.get("epoch", 0)
        return Line(entry["index"], epoch if isinstance(epoch, int) else 0, "error" not in entry, offset)
    return None


def scan_checkpoint(path: Path) -> Iterator[Line]:
    """Every complete line of a sample; torn or foreign lines are skipped."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        offset = 0
        for line in f:
            start = offset
            offset += len(line)
            if not line.endswith(b"\n"):
                break  # torn by a kill mid-write: that sample is simply not done
            m = _ENTRY_HEAD.match(line)  # line_outcome's first case, inline: resume scans millions of lines
            if m is not None:
                epoch = m.group(2)
                yield Line(int(m.group(1)), int(epoch) if epoch is not None else 0, _ERROR_KEY.search(line) is None, start)
                continue
            parsed = _parsed_outcome(line, start)
            if parsed is not None:
                yield parsed


# An epoch with no line when the predictions are merged (it cannot be: a dataset ends `done`
# only once every (sample, epoch) has one; this keeps a hand-edited checkpoint readable).
MISSING_EPOCH = error_record(ErrorKind.MISSING, "no answer for this epoch")


def replaces(had: bool, ok: bool) -> bool:
    """Whether a unit's later line is its record rather than the one before (`had`: that one
    succeeded): yes, unless it is a failure after a success (a unit answered stays answered)."""
    return ok or not had


class LineIndex:
    """Where each (sample, epoch)'s line is among some checkpoint-like files (the checkpoints of
    every shard layout, or the per-sample logs): its success if it has one, else a failure.

    Keeps ~13 bytes per (sample, epoch), never the lines; read them with `line(key)` inside
    `with` (key: units.unit_key). `latest`: of several lines the last one (a log's
    current record) unless it is a failure after a success, rather than the first failure (what
    the predictions always kept).
    """

    def __init__(self, paths: list[Path], total: int, *, epochs: int = 1, latest: bool = False):
        self.paths = [p for p in paths if p.exists()]  # a shard with no samples never wrote one
        self.epochs = epochs
        slots = total * epochs
        self.where = array("q", [-1]) * slots
        self.which = array("i", [0]) * slots
        self.good = bytearray(slots)
        for k, path in enumerate(self.paths):
            for index, epoch, ok, offset in scan_checkpoint(path):
                key = unit_key(index, epoch, epochs)
                if not (0 <= index < total and epoch < epochs):
                    continue
                first, had = self.where[key] < 0, self.good[key]
                if first or (ok and not had) or (latest and replaces(bool(had), ok)):
                    self.where[key], self.which[key], self.good[key] = offset, k, ok
        self._files: list[BinaryIO] = []

    def __enter__(self) -> LineIndex:
        self._files = [open(p, "rb") for p in self.paths]
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self._files:
            f.close()
        self._files = []

    def path(self, key: int) -> Path | None:
        """The file the line of this (sample, epoch) is in; None when it has none."""
        return None if self.where[key] < 0 else self.paths[self.which[key]]

    def line(self, key: int) -> bytes | None:
        """The line of this (sample, epoch), without its newline; None when it has none."""
        if self.where[key] < 0:
            return None
        f = self._files[self.which[key]]
        f.seek(self.where[key])
        return f.readline().rstrip(b"\n")


def merge_checkpoints(paths: list[Path], total: int, out: Path, *, epochs: int = 1, selection: Sequence[int] | None = None) -> int:
    """Write the final predictions file from the shards' checkpoints, streaming, in index order.

    One epoch: each line's bytes are copied with the `index` key dropped. Several: a sample's
    lines are parsed and joined into one entry (see _joined). `selection`: the indices to write
    (a --samples run); all of 0..total-1 by default. Returns the entries written.
    """
    written = 0
    with LineIndex(paths, total, epochs=epochs) as lines, atomic_writer(out) as w:
        w.write(b"{")
        for index in range(total) if selection is None else selection:
            if epochs == 1:
                line = lines.line(index)
                value = None if line is None else _without_index(line)
            else:
                value = _joined([lines.line(key) for key in sample_keys(index, epochs)])
            if value is None:
                continue
            w.write(b'%s\n  "%d": %s' % (b"," if written else b"", index, value))
            written += 1
        w.write(b"\n}\n")
    return written


def _without_index(line: bytes) -> bytes:
    """A one-epoch line as a predictions entry: its bytes without the `index` key."""
    m = _ENTRY_HEAD.match(line)
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
    return json_bytes(joined)


def read_predictions(path: Path) -> list[dict[str, Any]] | None:
    data = read_json(path)
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
    lines = []
    for epoch, (answer, error) in enumerate(zip(answers, errors, strict=True)):
        if error == MISSING_EPOCH:
            continue  # never answered: left to run
        line: dict[str, Any] = {"index": entry["index"], **({"epoch": epoch} if epoch else {})}
        line.update(origin_prompt=entry.get("origin_prompt", ""), prediction=answer, gold=entry.get("gold", ""))
        if error is not None:
            line["error"] = error
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
    with open(path, "rb") as f:
        # Small files parse fastest whole (one C call); only large ones are worth streaming.
        if os.fstat(f.fileno()).st_size > STREAM_ABOVE and f.readline().rstrip() == b"{":
            batch: list[dict[str, Any]] = []
            for raw in f:
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
    entries = read_predictions(path)
    if entries is None:
        raise ValueError(f"{path.name}: not a JSON object of predictions")
    yield from entries
