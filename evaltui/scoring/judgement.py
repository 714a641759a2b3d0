"""The verdict every per-sample evaluator returns.

A shared small type keeps the evaluators interchangeable for `score()`: each one turns a
(prediction, gold) pair into what it pulled out of the prediction and whether that is right.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Judgement(NamedTuple):
    extracted: str | None
    correct: bool


Judge = Callable[[str, str], Judgement]
