"""A pairwise baseline given as a file of its answers (`baseline_file`), not as a model of the plan.

Read here, in the plan's layer, so that the plan check refuses a file the judge could not use
(a missing file, a row without an answer: one line naming the field) before anything is sent,
and the engine reads the very same answers. Two layouts:

- `.jsonl`: one row per sample, keyed by `index` (the sample's index from 0, as `sample_ids`) or
  by an id field (`id`, `question_id` or `uid`) matched against the record's field of that name;
  the answer is `answer`, or FastChat's / ArenaHard's model-answer `choices[0].turns[0]` (a
  string, or its `content`), so their published baseline answers are read as they are;
- `.json`: evaltui's own `predictions/<model>/<dataset>.json` from another work dir (entries by
  sample index; an epoch that failed there has no answer here).

The file's sha-256 goes into the judging fingerprint: a changed file re-judges.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The row fields a `.jsonl` baseline may key its samples by, besides `index`.
ID_FIELDS = ("id", "question_id", "uid")
MAX_BYTES = 256 << 20  # a baseline file read whole (as a `.json` dataset is)
NO_ANSWER = 'no answer (a string "answer", or FastChat/ArenaHard\'s "choices": [{"turns": [...]}])'


class BaselineFileError(ValueError):
    """Why a baseline file cannot be used: one line, its path and the place in it."""


@dataclass(frozen=True)
class BaselineFile:
    """A baseline file's answers: by sample index (`by` = "index") or by a record field's value (as text)."""

    by: str
    answers: dict[int | str, list[str | None]]  # each sample's answers, one per epoch (None: that epoch failed)
    digest: str  # sha-256 of the file's bytes

    def for_records(self, records: list[dict[str, Any]] | None) -> dict[int, list[str | None]]:
        """The answers by sample index; by id, each record's answer found by its `by` field."""
        if self.by == "index":
            return {k: v for k, v in self.answers.items() if isinstance(k, int)}
        found: dict[int, list[str | None]] = {}
        for i, record in enumerate(records or []):
            key = record.get(self.by)
            if key is not None and str(key) in self.answers:
                found[i] = self.answers[str(key)]
        return found


def read_baseline_file(path: str) -> BaselineFile:
    """The file's answers, or BaselineFileError saying what is wrong and where."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise BaselineFileError(f"cannot read {path}: {e.strerror or e}") from None
    if len(data) > MAX_BYTES:
        raise BaselineFileError(f"{path} is larger than {MAX_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BaselineFileError(f"cannot read {path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    by, answers = _predictions(path, text) if Path(path).suffix == ".json" else _rows(path, text)
    if not answers:
        raise BaselineFileError(f"{path} has no answers")
    return BaselineFile(by, answers, hashlib.sha256(data).hexdigest())


def _predictions(path: str, text: str) -> tuple[str, dict[int | str, list[str | None]]]:
    """evaltui's predictions file: {"<index>": {"prediction": …, "error": …, "predictions": [...], "errors": [...]}}."""
    try:
        entries = json.loads(text)
    except ValueError as e:
        raise BaselineFileError(f"{path}: not JSON ({e})") from None
    if not isinstance(entries, dict):
        raise BaselineFileError(f"{path}: not evaltui's predictions (an object of entries by sample index); a file of rows is .jsonl")
    answers: dict[int | str, list[str | None]] = {}
    for key, entry in entries.items():
        if not key.isdigit() or not isinstance(entry, dict) or not isinstance(entry.get("prediction"), str):
            raise BaselineFileError(f'{path}: entry {key!r} is not a sample\'s predictions (its index, and a string "prediction")')
        many = entry.get("predictions")
        texts = many if isinstance(many, list) else [entry["prediction"]]
        errors = entry.get("errors") if isinstance(many, list) else [entry.get("error")]
        if not isinstance(errors, list) or len(errors) != len(texts):
            errors = [None] * len(texts)
        answers[int(key)] = [t if isinstance(t, str) and e is None else None for t, e in zip(texts, errors, strict=True)]
    return "index", answers


def _rows(path: str, text: str) -> tuple[str, dict[int | str, list[str | None]]]:
    by = ""
    answers: dict[int | str, list[str | None]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            row = json.loads(line)
        except ValueError as e:
            raise BaselineFileError(f"{where}: not JSON ({e})") from None
        if not isinstance(row, dict):
            raise BaselineFileError(f"{where}: not a JSON object")
        field, key = _key(row, where)
        if by and field != by:
            raise BaselineFileError(f"{where}: keys its sample by {field!r}, the lines before by {by!r}")
        by = field
        if key in answers:
            raise BaselineFileError(f"{where}: a second answer for {field} {key!r}")
        answers[key] = [_answer(row, where)]
    return by or "index", answers


def _key(row: dict[str, Any], where: str) -> tuple[str, int | str]:
    """The row's sample: its `index` (an integer ≥ 0), else its first id field (text)."""
    if "index" in row:
        index = row["index"]
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise BaselineFileError(f"{where}: index must be the sample's index, an integer ≥ 0 (got {index!r})")
        return "index", index
    for field in ID_FIELDS:
        value = row.get(field)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return field, str(value)
    raise BaselineFileError(f"{where}: no sample key (index, or an id field: {', '.join(ID_FIELDS)})")


def _answer(row: dict[str, Any], where: str) -> str:
    """`answer`, else the first turn of FastChat's / ArenaHard's first choice."""
    answer = row.get("answer")
    if isinstance(answer, str):
        return answer
    try:
        turn = row["choices"][0]["turns"][0]
        turn = turn["content"] if isinstance(turn, dict) else turn
    except (KeyError, IndexError, TypeError):
        turn = None
    if not isinstance(turn, str):
        raise BaselineFileError(f"{where}: {NO_ANSWER}")
    return turn
