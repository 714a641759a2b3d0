"""An OpenCompass shard's samples, counted from its prediction files as they grow (its `Tally`).

OpenCompass rewrites `tmp_<dataset>[_<i>].json` whole as samples finish (or appends a line a
sample to `tmp_<dataset>[_<i>].jsonl`), then writes the final `<dataset>[_<i>].json`: samples
are counted by their keys or lines. A whole file is read again only when it changed, and no
more often than keeps its reading under a twentieth of the time — except as its shard ends:
then its final file is read at once, or its count could stay short for good.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from evaltui import fastjson
from evaltui.engine.disk.predictions import WHOLE_BYTES
from evaltui.engine.follow.tail import AppendedLines
from evaltui.engine.follow.view import Outcome, stat_key
from evaltui.fsutil import Unreadable, read_regular

READ_SHARE = 20  # a whole file is read again at most once every 20 times its last reading took
_KEY_LINE = re.compile(rb'^    "(\d+)": \{', re.MULTILINE)  # a sample's key as json.dump(..., indent=4) writes it


class PredictionCount:
    """A shard's samples from its prediction files: the final one, else the `tmp_` one."""

    def __init__(self, final: Path, tmp_json: Path, tmp_lines: Path):
        self.final, self.tmp_json = final, tmp_json
        self._lines = AppendedLines(tmp_lines)
        self._seen: set[int] = set()
        self._keys: dict[Path, object] = {}
        self._next_read = 0.0

    def read(self, *, settle: bool = False) -> list[Outcome]:
        """Samples not counted before (the files only grow: a final file holds all a tmp_ had).
        `settle`: the shard has ended; its file is read now however recently the last was."""
        keys = self._whole_file_keys(settle)
        fallback = len(self._seen)  # a line without an index is the next sample
        for lines in self._lines.pieces() or ():
            for line in lines:
                keys.append(_line_key(line, fallback))
                fallback += 1
        new = [k for k in dict.fromkeys(keys) if k not in self._seen]
        self._seen.update(new)
        return [Outcome(k) for k in new]

    def _whole_file_keys(self, settle: bool) -> list[int]:
        path = self.final if self.final.exists() else self.tmp_json
        key = stat_key(path)
        if key is None or key == self._keys.get(path) or (time.monotonic() < self._next_read and not settle):
            return []
        started = time.monotonic()
        try:
            data = read_regular(path, WHOLE_BYTES)
        except Unreadable:
            raise  # said in one line by evaltui watch
        except OSError:
            return []
        found = [int(k) for k in _KEY_LINE.findall(data)]
        if not found:  # not indented as OpenCompass dumps it: parse it (a torn one says nothing)
            try:
                parsed = fastjson.loads(data)
            except ValueError:
                return []
            found = [int(k) for k in parsed if str(k).isdigit()] if isinstance(parsed, dict) else []
        self._keys[path] = key
        self._next_read = time.monotonic() + READ_SHARE * (time.monotonic() - started)
        return found


def _line_key(line: bytes, fallback: int) -> int:
    """A tmp_*.jsonl line's sample index: its `index`, or the key of a one-key object."""
    try:
        entry = fastjson.loads(line)
    except ValueError:
        return fallback
    if isinstance(entry, dict):
        if isinstance(entry.get("index"), int):
            return int(entry["index"])
        if len(entry) == 1 and str(next(iter(entry))).isdigit():
            return int(next(iter(entry)))
    return fallback
