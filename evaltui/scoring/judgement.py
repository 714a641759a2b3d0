"""The verdict every per-sample evaluator returns.

A shared small type keeps the evaluators interchangeable for `score()`: each one turns a
(prediction, gold) pair into what it pulled out of the prediction and whether that is right.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Judgement(NamedTuple):
    extracted: str | None
    correct: bool


Judge = Callable[[str, str], Judgement]


class Verdict(NamedTuple):
    """What an evaluator of several metrics says of one reply: what it pulled out, whether it is
    right by the main metric, and every metric's value (a ratio metric's as [right, of])."""

    extracted: str | None
    correct: bool
    scores: dict[str, Any]
    extra: dict[str, Any] | None = None  # what the details keep beside: a judge's `explanation`, an evaluator's `error` and `why`


#: (prediction, gold, the sample's predictions entry) → Verdict: the entry holds what some need
#: beyond the text (a log-likelihood request's per-choice sums).
ScoredJudge = Callable[[str, str, dict[str, Any]], Verdict]
