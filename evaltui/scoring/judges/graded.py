# ruff: noqa: E501  (Inspect AI's templates and instructions are kept word for word, their long lines too)
"""`model_graded_qa` and `model_graded_fact`: Inspect AI's grading prompts and grade parsing.

The templates, the default instructions and the grade patterns are Inspect AI's own, word for
word (inspect_ai/scorer/_model.py); tests/test_judges.py holds them against the installed
inspect_ai's constants, so a drift on either side is seen. As there: the grader is offered C/I
(C/P/I with `partial_credit`), its *last* `GRADE:` decides, a verdict outside what it was
offered is no grade (the sample's error, class `judge`), and the dataset's inputs have their
`[BEGIN DATA]`/`[END DATA]` markers neutralised so an answer cannot close the data block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evaltui.plan.judges import PLACEHOLDERS

QA_TEMPLATE = """
You are assessing a submitted answer on a given task based on a criterion. Here is the data:

[BEGIN DATA]
***
[Task]: {question}
***
[Submission]: {answer}
***
[Criterion]: {criterion}
***
[END DATA]

Does the submission meet the criterion?

{instructions}
"""

FACT_TEMPLATE = """
You are comparing a submitted answer to an expert answer on a given question. Here is the data:

[BEGIN DATA]
************
[Question]: {question}
************
[Expert]: {criterion}
************
[Submission]: {answer}
************
[END DATA]

Compare the factual content of the submitted answer with the expert answer. Ignore any differences in style, grammar, or punctuation.

Does the submission contain the content in the expert answer?

{instructions}
"""

TEMPLATES = {"model_graded_qa": QA_TEMPLATE, "model_graded_fact": FACT_TEMPLATE}


def default_instructions(partial_credit: bool) -> str:
    partial_letter = "P" if partial_credit else ""
    partial_prompt = '"P" for partially correct answers,' if partial_credit else ""
    return f"""
After assessing the submitted answer, reply with 'GRADE: $LETTER' (without quotes) where LETTER is one of C{partial_letter}I.  Please choose ONE option for the grade: either "C" for correct answers, {partial_prompt}or "I" for incorrect answers.

For example, after reviewing a correct answer you might write 'GRADE: C' or after reviewing an incorrect answer you might write 'GRADE: I'.

First, write out in a step by step manner your reasoning about the criterion to be sure that your conclusion is correct. Avoid simply stating the correct answers at the outset. Then, end with your answer formatted as 'GRADE: $LETTER' (without quotes) where LETTER is one of C{partial_letter}I.
"""


_GRADE_SPACING = r"[\s\u200b\u200c\u200d\u200e\u200f\u2060\u2063\ufeff]*"
_GRADE_WORD_VALUES = {"c": "C", "correct": "C", "i": "I", "incorrect": "I", "p": "P", "partial": "P"}
DEFAULT_GRADE_PATTERN = rf"(?is).*(?<!\w)GRADE(?!\w){_GRADE_SPACING}:{_GRADE_SPACING}([CPI])"
_PERMISSIVE_GRADE_PATTERN = rf"(?is).*(?<!\w)GRADE(?!\w){_GRADE_SPACING}:{_GRADE_SPACING}(\w*)"
_STRUCTURAL_DELIMITER_RE = re.compile(r"\[(BEGIN|END) DATA\]", re.IGNORECASE)
#: A grade's value, as Inspect's value_to_float reads C, P and I.
GRADE_VALUES = {"C": 1.0, "P": 0.5, "I": 0.0}


def neutralize(text: str) -> str:
    """`[END DATA]` as `[END-DATA]`: a submission cannot end the data block and speak to the grader."""
    return _STRUCTURAL_DELIMITER_RE.sub(lambda m: m.group(0).replace(" ", "-"), text)


class Grading:
    """One dataset's grading: its template, instructions and pattern, as its evaluator table sets them."""

    def __init__(
        self, kind: str, template: str | None = None, instructions: str | None = None, grade_pattern: str | None = None, partial_credit: bool = False
    ) -> None:
        self.template = template if template is not None else TEMPLATES[kind]
        self.own_instructions = not instructions
        self.instructions = instructions or default_instructions(partial_credit)
        self.default_pattern = grade_pattern is None
        self.validate = self.default_pattern and self.own_instructions
        self.offered = ("C", "P", "I") if partial_credit else ("C", "I")
        self.pattern = re.compile(_PERMISSIVE_GRADE_PATTERN if self.validate else (grade_pattern or DEFAULT_GRADE_PATTERN))

    def prompt(self, question: str, answer: str, criterion: str, record: Mapping[str, Any] | None = None) -> str:
        """The grader's prompt; a custom template may also name the record's fields."""
        metadata = {k: neutralize(v) if isinstance(v, str) else v for k, v in (record or {}).items() if k not in PLACEHOLDERS and isinstance(k, str)}
        return self.template.format(
            question=neutralize(question), answer=neutralize(answer), criterion=neutralize(criterion), instructions=self.instructions, **metadata
        )

    @staticmethod
    def value(grade: str, turn: int = 0) -> float:
        return GRADE_VALUES.get(grade, 0.0)

    def grade(self, reply: str) -> str | None:
        """The grade the reply ends on (C, P or I), None when it gives none that counts."""
        match = self.pattern.search(reply)
        value = match.group(1) if match else None
        if value is not None and self.default_pattern:
            normalized = value.strip().lower()
            if normalized in _GRADE_WORD_VALUES:
                value = _GRADE_WORD_VALUES[normalized]
            elif len(value.strip()) == 1:
                value = value.strip().upper()
            else:
                value = None
            if self.validate and value not in self.offered:
                value = None
        return value

