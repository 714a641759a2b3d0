"""Checkpoint lines that are no complete entry of their dataset: found, set aside, counted.

A checkpoint is read back by a fast scan that classifies lines by their head (checkpoint.py),
which is right for every line evaltui writes — and wrong for one damaged since: two lines run
together by a lost newline were copied into the final predictions file, which was then not
JSON, so scoring failed on every later run; `{"index":30}` or a `"prediction": null` counted as
answered and was never sent again; lines under another dataset's version header (checkpoints
joined by hand) were kept as this one's.

So when a run plans a pair, each of its checkpoints is read once in full (`Sorter`): a complete
line that does not parse as an entry — an object with an `index`, a string `prediction` and no
`error` but an object — or that comes after a version header not the pair's, is moved to a file
beside the checkpoint (`tmp_d.jsonl.damaged`, appended to, never deleted), the checkpoint is
rewritten without it (atomically), and its sample, no longer done, is sent again. A torn last
line (a kill mid-write) is no damage: reopening the checkpoint cuts it off, as ever.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from evaltui import fastjson
from evaltui.engine.disk.checkpoint import ANY_SIZE, LINE_BYTES, TURN_HEAD, Line, TurnNotes
from evaltui.fsutil import atomic_writer, open_regular

DAMAGED = ".damaged"


def entry_of(raw: bytes) -> Line | None:
    """The sample, epoch and success of a complete line that is an entry; None otherwise."""
    try:
        entry: Any = fastjson.loads(raw)
    except ValueError:
        return None
    if type(entry) is not dict:
        return None
    index, epoch, error = entry.get("index"), entry.get("epoch", 0), entry.get("error")
    if type(index) is not int or index < 0 or type(epoch) is not int or epoch < 0:
        return None
    if type(entry.get("prediction")) is not str or not (error is None or type(error) is dict):
        return None
    return Line(index, epoch, error is None, 0)


def _version_of(raw: bytes) -> str | None:
    """The version a header line names; None for a line that is no header."""
    if not raw.startswith(b'{"version"'):
        return None
    try:
        head = fastjson.loads(raw)
    except ValueError:
        return None
    return str(head["version"]) if type(head) is dict and list(head) == ["version"] else None


def _lines(f: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of every complete line; a torn last one is left out, and a line past
    LINE_BYTES comes as b"" (read no further than its end, its bytes not kept)."""
    offset = 0
    while raw := f.readline(LINE_BYTES + 1):
        if not raw.endswith(b"\n"):
            if len(raw) <= LINE_BYTES:
                return  # torn by a kill mid-write: cut off when the checkpoint is reopened
            while raw and not raw.endswith(b"\n"):
                raw = f.readline(1 << 20)
            yield offset, b""
            offset = f.tell()
            continue
        yield offset, raw
        offset += len(raw)


class Sorter:
    """One checkpoint read through: iterating it yields the entries (a sample's each); the lines
    that are none — no complete entry, or after a header of a version not `version` ("": any) —
    are noted by where they are, and `set_aside` moves them beside the file. Memory: a note per
    damaged line, nothing per sample."""

    def __init__(self, path: Path, version: str, turns: TurnNotes | None = None) -> None:
        """`turns`: where a conversation dataset's turn lines are noted (checkpoint.py)."""
        self.path, self.version, self.turns = path, version, turns
        self.aside = path.with_name(path.name + DAMAGED)
        self.damaged: list[int] = []  # offsets of the lines to set aside

    def __iter__(self) -> Iterator[Line]:
        self.damaged = []
        foreign = False  # after a header of another version
        with open_regular(self.path, ANY_SIZE) as f:
            for offset, raw in _lines(f):
                header = _version_of(raw)
                if header is not None:
                    foreign = bool(self.version) and header != self.version
                    if foreign:
                        self.damaged.append(offset)
                    continue
                if not foreign and raw.startswith(TURN_HEAD):  # a conversation's request, its unit not done
                    if self.turns is not None:
                        self.turns.note(raw, offset)
                    continue
                line = None if foreign else entry_of(raw)
                if line is None:
                    self.damaged.append(offset)
                else:
                    if self.turns is not None and line.ok:
                        self.turns.settled(line.sample, line.epoch)
                    yield line._replace(offset=offset)

    def set_aside(self) -> int:
        """Move the damaged lines to the file beside (appended: first, so a kill before the
        checkpoint is rewritten sets them aside again and loses nothing), then rewrite the
        checkpoint without them; how many there were."""
        if not self.damaged:
            return 0
        bad = set(self.damaged)
        with open_regular(self.path, ANY_SIZE) as f, open(self.aside, "ab") as out:
            for offset, raw in _lines(f):
                if offset in bad:
                    out.write(raw or b"(a line longer than %d bytes, not kept)\n" % LINE_BYTES)
            out.flush()
            os.fsync(out.fileno())
        with open_regular(self.path, ANY_SIZE) as f, atomic_writer(self.path) as w:
            for offset, raw in _lines(f):
                if offset not in bad:
                    w.write(raw)
        return len(bad)
