"""Evaluators that need more than a reply and its gold: a judge model's grade, or your own function.

What they share with every other evaluator is the `ScoredJudge` the scorer calls per answer;
what they need besides is made by the engine (the judge's verdicts, already on disk; the
user's function, loaded) and handed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltui.plan import DatasetConfig
from evaltui.plan.judges import JUDGED, Key, answer_hash
from evaltui.scoring.judgement import ScoredJudge, Verdict
from evaltui.scoring.judges.graded import Grading
from evaltui.scoring.judges.python import load_function, python_judge

__all__ = ["JUDGED", "Grading", "Key", "answer_hash", "graded_judge", "grading_of", "load_function", "python_judge"]


def grading_of(ds: DatasetConfig) -> Grading:
    """The dataset's grading: its template (a file's text, else Inspect's), instructions, pattern."""
    ev = ds.evaluator
    template = None
    if ev.template is not None:
        with open(ev.template, encoding="utf-8") as f:
            template = f.read(1 << 20)
    return Grading(ev.type, template, ev.instructions, ev.grade_pattern, ev.partial_credit)


def graded_judge(verdicts: Mapping[Key, Mapping[str, Any]]) -> ScoredJudge:
    """The scorer's judge for a judged dataset: each (sample, epoch)'s verdict as the judge gave
    it; a unit the judge failed (or never got to) fails, with class `judge`."""

    def judge(prediction: str, gold: str, sample: dict[str, Any]) -> Verdict:
        key = (sample.get("index", -1), sample.get("epoch", 0), 0)
        found = verdicts.get(key)
        if found is not None and found.get("answer") != answer_hash(prediction):
            found = None  # a verdict on an earlier answer
        if found is None or "grade" not in found:
            why = str(found.get("error", "")) if found is not None else "not judged (the judge was not reached)"
            extra = {"error": "judge", "why": why, **({"explanation": found["reply"]} if found and found.get("reply") else {})}
            return Verdict(None, False, {"accuracy": 0.0}, extra)
        value = float(found.get("value", 0.0))
        return Verdict(str(found["grade"]), value >= 1.0, {"accuracy": value}, {"explanation": str(found.get("reply", ""))})

    return judge
