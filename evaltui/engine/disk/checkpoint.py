"""Checkpoints (SPEC §6): the append-only writer, and their lines classified and indexed.

A checkpoint is append-only JSONL, one line per finished sample; a kill mid-write can leave a
torn last line, which reading skips and reopening cuts off, losing only that sample. Resume
planning scans them, and the shard's end merges them into the final predictions file
(predictions.py).
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from evaltui import fastjson
from evaltui.engine.disk.units import unit_key
from evaltui.fsutil import Unreadable, json_bytes, not_regular, open_regular

#: The longest checkpoint (or sample log) line read: a prompt of 16 Mi characters and a reply of
#: max_reply_bytes fit; a longer one is damage (a file of NULs has no line end at all).
LINE_BYTES = 256 << 20
#: Checkpoints of millions of samples are gigabytes; what is bounded is each line.
ANY_SIZE = 1 << 50
#: The most of a checkpoint kept in memory as it is written (Checkpoint.open's `keep`).
KEPT_BYTES = 64 << 10


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
        self.kept: bytearray | None = None  # every byte of the file, when it began it (open's `keep`)
        self._head = b""  # the version line of a file it began, until written

    def open(self, defer: Callable[[Callable[[], None]], object] | None = None, *, keep: bool = False) -> None:
        """Open for appending, first cutting off a torn last line so the next line starts clean.

        `keep`: a file it begins (empty) is also kept in memory, up to KEPT_BYTES, so the merge
        of a small dataset reads its lines from there rather than opening it twice more."""
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags, 0o644)
        except (FileNotFoundError, NotADirectoryError):  # its folder made only when missing (a file there: mkdir's error)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, flags, 0o644)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a FIFO, a device, a folder in its place
            os.close(fd)
            raise not_regular(self.path, st.st_mode)
        size = st.st_size
        if size:
            tail_start = max(0, size - 65536)
            while True:
                data = os.pread(fd, size - tail_start, tail_start)
                if data.endswith(b"\n"):
                    break
                cut = data.rfind(b"\n")
                if cut >= 0:
                    size = tail_start + cut + 1
                    os.ftruncate(fd, size)
                    break
                if tail_start == 0:
                    size = 0
                    os.ftruncate(fd, 0)
                    break
                tail_start = max(0, tail_start - 65536)
        self._fd = fd
        self._defer = defer
        self._failed = None
        self.kept = bytearray() if keep and size == 0 else None
        if size == 0 and self.version:  # (its size as cut: no fstat again, for each of 10,000 datasets' files)
            self._head = json_bytes({"version": self.version}) + b"\n"
            if defer is None:
                self.flush()  # else it goes out with the first lines, in their write (or at close)

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
        if (self._pending or self._head) and self._fd is not None:
            lines, self._pending, head, self._head = self._pending, [], self._head, b""
            self._write(head + b"".join(lines))  # (should it fail, nothing follows it: every later append raises)

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
        if self.kept is not None:
            if len(self.kept) + len(line) <= KEPT_BYTES:
                self.kept += line
            else:
                self.kept = None

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
        with open_regular(path, ANY_SIZE) as f:
            first = f.readline(LINE_BYTES)
    except Unreadable:
        raise
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
ENTRY_HEAD = re.compile(rb'\{"index": ?(\d+), ?(?:"epoch": ?(\d+), ?)?')
_ERROR_KEY = re.compile(rb'"error": ?\{')
#: A conversation's answered request before its last (its turn line, below) starts so: no entry of a
#: sample (its unit is not done), left out of every scan of them.
TURN_HEAD = b'{"turn":'


class Line(NamedTuple):
    """One complete line of a checkpoint (or of a per-sample log, which has the same head)."""

    sample: int  # its index (a tuple's own `index` method keeps that name)
    epoch: int  # 0 when the line has none (every line of a one-epoch run, every older line)
    ok: bool  # no "error": the sample succeeded
    offset: int  # where the line starts


def line_outcome(line: bytes) -> Line | None:
    """The sample, epoch and success of one complete checkpoint line (offset 0); None for a line
    that is no sample's (the version line, garbage). Lines are classified without being parsed."""
    m = ENTRY_HEAD.match(line)
    if m is not None:
        epoch = m.group(2)
        return Line(int(m.group(1)), int(epoch) if epoch is not None else 0, _ERROR_KEY.search(line) is None, 0)
    return _parsed_outcome(line, 0)


def _parsed_outcome(line: bytes, offset: int) -> Line | None:
    if line.startswith(TURN_HEAD):
        return None
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
        f = open_regular(path, ANY_SIZE)
    except FileNotFoundError:
        return
    with f:
        yield from _classified(iter(lambda: f.readline(LINE_BYTES), b""))  # (a longer line: no line end, read as torn)


def _lines_of(data: bytes) -> Iterator[bytes]:
    """The lines of bytes held in memory, each with its line end (the last one may have none)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start) + 1 or len(data)
        yield data[start:end]
        start = end


def _classified(lines: Iterable[bytes]) -> Iterator[Line]:
    """The sample lines among a file's lines, each with its offset, up to a torn one."""
    offset = 0
    for line in lines:
        start = offset
        offset += len(line)
        if not line.endswith(b"\n"):
            break  # torn by a kill mid-write: that sample is simply not done
        m = ENTRY_HEAD.match(line)  # line_outcome's first case, inline: resume scans millions of lines
        if m is not None:
            epoch = m.group(2)
            yield Line(int(m.group(1)), int(epoch) if epoch is not None else 0, _ERROR_KEY.search(line) is None, start)
            continue
        parsed = _parsed_outcome(line, start)
        if parsed is not None:
            yield parsed


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

    def __init__(self, paths: list[Path], total: int, *, epochs: int = 1, latest: bool = False, held: Mapping[Path, bytes] | None = None):
        """`held`: the bytes of some of the files, which are read from there (Checkpoint.kept)."""
        self.held = held or {}
        self.paths = [p for p in paths if p in self.held or p.exists()]  # a shard with no samples never wrote one
        self.epochs = epochs
        slots = total * epochs
        self.where = array("q", [-1]) * slots
        self.which = array("i", [0]) * slots
        self.good = bytearray(slots)
        for k, path in enumerate(self.paths):
            data = self.held.get(path)
            for index, epoch, ok, offset in scan_checkpoint(path) if data is None else _classified(_lines_of(data)):
                key = unit_key(index, epoch, epochs)
                if not (0 <= index < total and epoch < epochs):
                    continue
                first, had = self.where[key] < 0, self.good[key]
                if first or (ok and not had) or (latest and replaces(bool(had), ok)):
                    self.where[key], self.which[key], self.good[key] = offset, k, ok
        self._files: list[BinaryIO | None] = []

    def __enter__(self) -> LineIndex:
        self._files = [None if p in self.held else open_regular(p, ANY_SIZE) for p in self.paths]
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self._files:
            if f is not None:
                f.close()
        self._files = []

    def path(self, key: int) -> Path | None:
        """The file the line of this (sample, epoch) is in; None when it has none."""
        return None if self.where[key] < 0 else self.paths[self.which[key]]

    def line(self, key: int) -> bytes | None:
        """The line of this (sample, epoch), without its newline; None when it has none."""
        if self.where[key] < 0:
            return None
        f, at = self._files[self.which[key]], self.where[key]
        if f is None:
            held = self.held[self.paths[self.which[key]]]
            return held[at : held.index(b"\n", at)]
        f.seek(at)
        return f.readline().rstrip(b"\n")


# ------------------------------------------------------------------ a conversation's turn lines
# A conversation's requests answered before its last, a checkpoint line each: a kill between two
# turns re-sends only the one not answered.
#
#     {"turn":1,"index":3,"epoch":2,"kind":"turn","prompt":"…","answer":"…","usage":{…},"took":1.2}
#
# The worker writes one (through the shard's Checkpoint, and waits for it to be on disk) as each
# request of a conversation but the last is answered, before it sends the next; the last answer
# goes into the unit's entry, with every request's under `turns`. A turn line is no entry
# (TURN_HEAD keeps it out of every scan of them): its unit is not done. When a run plans a pair,
# `TurnNotes` notes where the turn lines of the units still to do are, and `read` hands them
# back, so the unit goes on from its first request not answered.

_TURN_FIELDS = re.compile(rb'\{"turn":(\d+),"index":(\d+),(?:"epoch":(\d+),)?')


def turn_of(line: bytes) -> tuple[int, int, int] | None:
    """(index, epoch, the request's number) of a turn line; None for any other line."""
    m = _TURN_FIELDS.match(line) if line.startswith(TURN_HEAD) else None
    return None if m is None else (int(m.group(2)), int(m.group(3) or 0), int(m.group(1)))


def turn_line(index: int, epoch: int, number: int, turn: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint line of a conversation's `number`-th request (from 0), answered."""
    head: dict[str, Any] = {"turn": number, "index": index, "epoch": epoch} if epoch else {"turn": number, "index": index}
    return {**head, **turn}


class TurnNotes:
    """Where the turn lines of one checkpoint are, by unit key (disk/units.py), for the
    units whose entry has not been seen (`settled` drops a unit's once its answer is read):
    an offset per line of the units a kill or a failure left unfinished, not one per unit."""

    def __init__(self, epochs: int):
        self.epochs = epochs
        self._where: dict[int, list[int]] = {}

    def note(self, raw: bytes, offset: int) -> bool:
        """Note `raw` (at `offset`) if it is a turn line; whether it is one."""
        if not raw.startswith(TURN_HEAD):
            return False
        turn = turn_of(raw)
        if turn is not None:
            self._where.setdefault(unit_key(turn[0], turn[1], self.epochs), []).append(offset)
        return True

    def settled(self, index: int, epoch: int) -> None:
        """The unit's answer was read: its turns are in it."""
        if self._where:
            self._where.pop(unit_key(index, epoch, self.epochs), None)

    def read(self, path: Path, done: bytearray, into: dict[int, dict[int, dict[str, Any]]]) -> None:
        """Add to `into` the answered requests of each unit noted and not `done` (a byte per
        unit key), by their number, read from `path` (before it is rewritten): a later line of
        a request (a later run's) wins over an earlier one."""
        with open_regular(path, ANY_SIZE) as f:
            for key, offsets in self._where.items():
                if key < len(done) and done[key]:
                    continue
                for offset in offsets:
                    f.seek(offset)
                    try:
                        line = fastjson.loads(f.readline(LINE_BYTES))
                    except ValueError:
                        continue
                    if isinstance(line, dict) and isinstance(line.get("turn"), int):
                        number = line.pop("turn")
                        line.pop("index", None)
                        line.pop("epoch", None)
                        into.setdefault(key, {})[number] = line


def in_order(by_number: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """A unit's answered requests from the first, up to the first one missing."""
    turns: list[dict[str, Any]] = []
    while len(turns) in by_number:
        turns.append(by_number[len(turns)])
    return turns
