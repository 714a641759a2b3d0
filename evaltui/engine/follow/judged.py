"""A judged pair's verdicts as `evaltui watch` counts them: `judgments/<model>/<dataset>.jsonl`
(engine/judge/verdicts.py) read as the run appends it, from where the last look stopped.

The run counts its verdicts against the judging's fingerprint (the judge, its settings, the
grading) and the hash of each answer; a watcher does not rebuild the grader (its records, a
pairwise baseline's answers) to know them, so it trusts the file: the verdicts that count are
those of the fingerprint the newest line carries (a re-run with other judge settings writes
lines of another), one per (sample, epoch, turn), the latest standing as read_verdicts takes
it (a later failure does not undo a grade of the same answer). A verdict of an answer since
re-answered counts until the run writes the new one: what the file says, not what it will say.
"""

from __future__ import annotations

from pathlib import Path

from evaltui import fastjson
from evaltui.engine.follow.tail import AppendedLines

_Key = tuple[int, int, int]  # (sample, epoch, turn)


class _Judging:
    """The verdicts of one fingerprint: each unit's latest (answer hash, graded), and the counts."""

    def __init__(self) -> None:
        self.units: dict[_Key, tuple[object, bool]] = {}
        self.judged = self.failed = 0

    def take(self, key: _Key, answer: object, graded: bool) -> None:
        earlier = self.units.get(key)
        if earlier is not None:
            if not graded and earlier[1] and earlier[0] == answer:
                return  # a later failure does not undo a verdict on the same answer
            self.judged -= earlier[1]
            self.failed -= not earlier[1]
        self.units[key] = (answer, graded)
        self.judged += graded
        self.failed += not graded


class VerdictCount:
    """The pair's verdicts file followed: `counts()` reads what was appended since the last call."""

    def __init__(self, path: Path) -> None:
        self._lines = AppendedLines(path)
        self._of: dict[str, _Judging] = {}
        self._newest = ""  # the fingerprint of the newest line read

    def counts(self) -> tuple[int, int]:
        """(judged, failed): the units whose latest verdict is a grade, and those whose is an error."""
        pieces = self._lines.pieces()
        if pieces is None:  # set aside or cut (a --fresh run): counted again from its start
            self._lines, self._of, self._newest = AppendedLines(self._lines.path), {}, ""
            pieces = self._lines.pieces()
        for lines in pieces or ():
            for line in lines:
                self._take(line)
        found = self._of.get(self._newest)
        return (found.judged, found.failed) if found is not None else (0, 0)

    def _take(self, raw: bytes) -> None:
        try:
            line = fastjson.loads(raw)
        except ValueError:  # a line torn by a kill
            return
        if not isinstance(line, dict) or not isinstance(fingerprint := line.get("fingerprint"), str):
            return
        index, epoch, turn = line.get("index"), line.get("epoch", 0), line.get("turn", 0)
        if isinstance(index, int) and isinstance(epoch, int) and isinstance(turn, int):
            self._newest = fingerprint
            self._of.setdefault(fingerprint, _Judging()).take((index, epoch, turn), line.get("answer"), "grade" in line)
