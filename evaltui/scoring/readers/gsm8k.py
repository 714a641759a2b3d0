"""GSM8K: pull the final number out of a worked solution and compare it numerically.

Where to look, in order:
  1. after `####` (the dataset's own answer marker, which few-shot prompts teach);
  2. inside `\\boxed{...}` (what math-tuned models write);
  3. after "the answer is" / "answer is" (what chain-of-thought prompts teach);
  4. the last number anywhere in the text.
For the prediction the *first* `####` / `\\boxed` / "answer is" wins: a base model that keeps
generating after answering tends to invent a new question with its own answer.  For the gold the
number after the *last* `####` is used, as the dataset writes exactly one at the end.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from ..judgement import Judgement

# An optional "$", then an integer with or without thousands commas ("1,234" but not "1, 2"),
# then optional decimals - or a fraction "1/2" (not part of a date "12/25/2023").
_NUMBER_RE = re.compile(
    r"(?<![\d/])\d+/\d+(?![\d/])"
    r"|(?:\$\s*)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
)
_ANSWER_IS_RE = re.compile(r"answer\s+is\s*:?\s*(?=-?[ \t]*\$?\d)", re.IGNORECASE)
_BOXED_RE = re.compile(r"\\boxed\s*\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
_MARKER = "####"


def _signed(text: str, match: re.Match[str]) -> str:
    """The number as plain digits (no "$", thousands commas or spaces), with its minus sign.

    A "-" before the number, against it or a few spaces away, is its sign ("-3", "= -3", "is - 3",
    "\\boxed{- 3}"), unless it joins two words or numbers ("10-12", "COVID-19") or follows a number
    or a bracket it subtracts from ("12 - 3", "12 -3", "(4 + 8) - 3")."""
    value = re.sub(r"[\s$,]", "", match.group(0))
    dash = match.start() - 1
    while dash >= 0 and text[dash] in " \t":
        dash -= 1
    if dash < 0 or text[dash] != "-":
        return value
    before = text[:dash].rstrip()
    if before and (before[-1].isdigit() or before[-1] in ")]" or len(before) == dash and (before[-1].isalnum() or before[-1] == "_")):
        return value
    return "-" + value


def _first_number(text: str, pos: int = 0) -> str | None:
    match = _NUMBER_RE.search(text, pos)
    return _signed(text, match) if match else None


def _last_number(text: str) -> str | None:
    last = None
    for match in _NUMBER_RE.finditer(text):
        last = match
    return _signed(text, last) if last else None


def extract_prediction_number(text: str) -> str | None:
    for segment in text.split(_MARKER)[1:]:
        number = _first_number(segment)
        if number is not None:
            return number
    boxed = _BOXED_RE.search(text)
    if boxed:
        number = _first_number(boxed.group(1))
        if number is not None:
            return number
    match = _ANSWER_IS_RE.search(text)
    if match:
        return _first_number(text, match.end())
    return _last_number(text)


def extract_gold_number(text: str) -> str | None:
    if _MARKER in text:
        number = _first_number(text.rsplit(_MARKER, 1)[1])
        if number is not None:
            return number
    return _last_number(text)


def _value(number: str) -> float:
    if "/" in number:
        return float(Fraction(number))  # ZeroDivisionError for "1/0"
    return float(number)


def numbers_equal(a: str, b: str) -> bool:
    """`18`, `18.0`, `18.00` and `36/2` are the same answer; float noise is tolerated."""
    try:
        x, y = _value(a), _value(b)
    except (ValueError, ZeroDivisionError):
        return False
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6)


def judge_gsm8k(prediction: str, gold: str) -> Judgement:
    extracted = extract_prediction_number(prediction)
    want = extract_gold_number(gold)
    if extracted is None or want is None:
        return Judgement(extracted, False)
    return Judgement(extracted, numbers_equal(extracted, want))
