"""GSM8K: pull the final number out of a worked solution and compare it numerically.

Where to look, in order:
  1. after `####` (the dataset's own answer marker, which few-shot prompts teach);
  2. after "the answer is" / "answer is" (what chain-of-thought prompts teach);
  3. the last number anywhere in the text.
For the prediction the *first* `####` / "answer is" wins: a base model that keeps generating
after answering tends to invent a new question with its own answer.  For the gold the number
after the *last* `####` is used, as the dataset writes exactly one at the end.
"""

from __future__ import annotations

import math
import re

from .judgement import Judgement

# An optional sign that is not a hyphen inside "10-12", an optional "$", then an integer
# with or without thousands commas ("1,234" but not "1, 2"), then optional decimals.
_NUMBER = r"(?:(?<![\w)])-)?\$?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_NUMBER_RE = re.compile(_NUMBER)
_ANSWER_IS_RE = re.compile(r"answer\s+is\s*:?\s*(" + _NUMBER + ")", re.IGNORECASE)
_MARKER = "####"


def _clean(raw: str) -> str:
    """The number as plain digits: no "$", thousands commas or spaces."""
    return re.sub(r"[\s$,]", "", raw)


def _first_number(text: str) -> str | None:
    match = _NUMBER_RE.search(text)
    return _clean(match.group(0)) if match else None


def _last_number(text: str) -> str | None:
    last = None
    for match in _NUMBER_RE.finditer(text):
        last = match
    return _clean(last.group(0)) if last else None


def extract_prediction_number(text: str) -> str | None:
    for segment in text.split(_MARKER)[1:]:
        number = _first_number(segment)
        if number is not None:
            return number
    match = _ANSWER_IS_RE.search(text)
    if match:
        return _clean(match.group(1))
    return _last_number(text)


def extract_gold_number(text: str) -> str | None:
    if _MARKER in text:
        number = _first_number(text.rsplit(_MARKER, 1)[1])
        if number is not None:
            return number
    return _last_number(text)


def numbers_equal(a: str, b: str) -> bool:
    """`18`, `18.0` and `18.00` are the same answer; float noise is tolerated."""
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6)


def judge_gsm8k(prediction: str, gold: str) -> Judgement:
    extracted = extract_prediction_number(prediction)
    want = extract_gold_number(gold)
    if extracted is None or want is None:
        return Judgement(extracted, False)
    return Judgement(extracted, numbers_equal(extracted, want))
