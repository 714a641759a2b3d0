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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evaltui import fastjson
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
# evaltui wrote compact JSON). Inside a JSON string every quote is escaped, so `"error":{` can
# only be the key of a failure entry: lines can be classified without parsing them, which keeps
# resume and merge fast for millions of samples.
_ENTRY_HEAD = re.compile(rb'\{"index": ?(\d+), ?')
_ERROR_KEY = re.compile(rb'"error": ?\{')


def line_outcome(line: bytes) -> tuple[int, bool] | None:
    """(index, succeeded) of one complete checkpoint line; None for a line that is no sample's
    (the version line, garbage). Checkpoint lines are classified without being parsed."""
    m = _ENTRY_HEAD.match(line)
    if m is not None:
        return int(m.group(1)), _ERROR_KEY.search(line) is None
    try:
        entry = fastjson.loads(line)
    except ValueError:
        return None
    if isinstance(entry, dict) and isinstance(entry.get("index"), int):
        return entry["index"], "error" not in entry
    return None


def scan_checkpoint(path: Path) -> Iterator[tuple[int, bool, int]]:
    """(index, succeeded, byte offset) of each complete line; torn or foreign lines are skipped."""
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
                yield int(m.group(1)), _ERROR_KEY.search(line) is None, start
                continue
            outcome = line_outcome(line)
            if outcome is not None:
                yield outcome[0], outcome[1], start


def merge_checkpoints(paths: list[Path], total: int, out: Path) -> int:
    """Write the final predictions file from the shards' checkpoints, streaming, in index order.

    Keeps 10 bytes per sample in memory (where its best line is), never the entries themselves,
    and copies each line's bytes with the `index` key dropped. Returns the entries written.
    """
    paths = [p for p in paths if p.exists()]  # a shard with no samples never wrote one
    where = array("q", [-1]) * total
    which = array("i", [0]) * total
    good = bytearray(total)
    for k, path in enumerate(paths):
        for index, ok, offset in scan_checkpoint(path):
            if 0 <= index < total and (where[index] < 0 or (ok and not good[index])):
                where[index], which[index], good[index] = offset, k, ok
    files = [open(p, "rb") for p in paths]
    written = 0
    try:
        with atomic_writer(out) as w:
            w.write(b"{")
            for index in range(total):
                if where[index] < 0:
                    continue
                f = files[which[index]]
                f.seek(where[index])
                line = f.readline().rstrip(b"\n")
                m = _ENTRY_HEAD.match(line)
                if m is not None:
                    value = b"{" + line[m.end() :]
                else:
                    entry = fastjson.loads(line)
                    entry.pop("index", None)
                    value = json_bytes(entry)
                w.write(b'%s\n  "%d": %s' % (b"," if written else b"", index, value))
                written += 1
            w.write(b"\n}\n")
    finally:
        for f in files:
            f.close()
    return written


def read_predictions(path: Path) -> list[dict[str, Any]] | None:
    data = read_json(path)
    if not isinstance(data, dict):
        return None
    return [{"index": int(k), **v} for k, v in sorted(data.items(), key=lambda kv: int(kv[0]))]


def predictions_to_checkpoint(predictions: Path, checkpoint: Path) -> None:
    """Write a final predictions file back as checkpoint lines (atomically: all or nothing)."""
    with atomic_writer(checkpoint) as w:
        for entry in iter_predictions(predictions):
            w.write(json_bytes(entry) + b"\n")


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
