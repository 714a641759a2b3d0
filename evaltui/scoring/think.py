"""A reasoning model's thinking, set apart from its answer before any evaluator reads it.

`<think>…</think>` (a model's `reasoning_tags`) is cut out of each answer: what the model
thought is not what it answered, and a number or a letter in the thinking must not be read as
its answer. A reply that opens the tag and never closes it stopped while thinking: it has no
answer. A reply with only the closing tag began its thinking in the prompt (chat templates that
open it for the model): everything before the tag is thinking. The checkpoint and the
per-sample log keep the whole reply; only what the evaluators see is stripped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

DEFAULT_TAGS = ("<think>", "</think>")


def strip_reasoning(text: str, tags: Sequence[str] = DEFAULT_TAGS) -> str:
    """The answer without its thinking ("" when the thinking never ended); as it was without tags."""
    if len(tags) != 2:
        return text
    opening, closing = tags
    before, closed, after = text.rpartition(closing)
    if closed:
        start = before.find(opening)
        return ((before[:start] if start >= 0 else "") + after).strip()
    start = text.find(opening)
    return text if start < 0 else ""


def stripped_entries(entries: Iterable[dict[str, Any]], tags: Sequence[str] = DEFAULT_TAGS) -> Iterator[dict[str, Any]]:
    """Predictions entries whose `prediction` (and each epoch's, `predictions`) have their thinking cut out."""
    if len(tags) != 2:
        yield from entries
        return
    opening, closing = tags
    for entry in entries:
        text, many = entry.get("prediction"), entry.get("predictions")
        if not _tagged(text, opening, closing) and not (isinstance(many, list) and any(_tagged(t, opening, closing) for t in many)):
            yield entry
            continue
        out = dict(entry)
        if isinstance(text, str):
            out["prediction"] = strip_reasoning(text, tags)
        if isinstance(many, list):
            out["predictions"] = [strip_reasoning(t, tags) if isinstance(t, str) else t for t in many]
        yield out


def _tagged(text: Any, opening: str, closing: str) -> bool:
    return isinstance(text, str) and (opening in text or closing in text)
