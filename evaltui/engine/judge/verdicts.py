"""A judged dataset's verdicts on disk: `judgments/<model>/<dataset>.jsonl`, one line per
(sample, epoch, turn) as the judge gave it, appended and flushed as each comes back.

A kill -9 loses only the verdicts in flight (a torn last line is skipped); a re-run judges only
the units without a verdict of the same judging — its fingerprint (the judge model, its settings,
the template, the instructions) and the answer it graded (a re-answered sample is judged
again). A failed judging (the judge down, no grade in its reply) is written too, so the result
can say why, but does not count as judged: the next run asks again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from evaltui.plan.judges import Key


def read_verdicts(path: Path, fingerprint: str) -> dict[Key, dict[str, Any]]:
    """Each unit's latest verdict of this judging (errors included), by (sample, epoch, turn)."""
    found: dict[Key, dict[str, Any]] = {}
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return found
    with f:
        for raw in f:
            try:
                line = json.loads(raw)
            except ValueError:  # a line torn by a kill
                continue
            if not isinstance(line, dict) or line.get("fingerprint") != fingerprint:
                continue
            index, epoch, turn = line.get("index"), line.get("epoch", 0), line.get("turn", 0)
            if isinstance(index, int) and isinstance(epoch, int) and isinstance(turn, int):
                key = (index, epoch, turn)
                earlier = found.get(key)
                if "grade" not in line and earlier is not None and "grade" in earlier and earlier.get("answer") == line.get("answer"):
                    continue  # a later failure does not undo a verdict on the same answer
                found[key] = line
    return found


def judged(verdict: dict[str, Any] | None, of: str) -> bool:
    """Whether `verdict` stands: given (not an error) on the text whose hash is `of`."""
    return verdict is not None and "grade" in verdict and verdict.get("answer") == of


class VerdictWriter:
    """Appends verdict lines, each flushed to the file as it is written (what a kill -9 keeps)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[bytes] = open(path, "ab")
        if self._f.tell() and not _ends_with_newline(path):
            self._f.write(b"\n")  # after a torn line: the next starts on its own

    def write(self, line: dict[str, Any]) -> None:
        self._f.write(json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")
        self._f.flush()

    def close(self) -> None:
        with self._f:
            os.fsync(self._f.fileno())


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
