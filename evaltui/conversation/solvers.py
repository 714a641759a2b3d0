"""Inspect AI's solvers that shape a question or ask again, with Inspect's own templates.

Copied from inspect_ai (src/inspect_ai/solver/_multiple_choice.py, _prompt.py, _critique.py;
MIT licence) word for word, so a score here can be set beside Inspect's:

- `multiple_choice`: the question and its options lettered A), B), … in SINGLE_ANSWER_TEMPLATE
  (Inspect's default, `multiple_choice()`), the options shuffled by a fixed seed when the
  dataset says `shuffle = true`; the reply's `ANSWER: X` read as Inspect's `parse_answers`
  reads it, and mapped back to the letter the option has in the record (Inspect's
  `pretend_we_didnt_shuffle`: the prediction becomes "ANSWER: <original letter>").
- `chain_of_thought`: DEFAULT_COT_TEMPLATE around the question.
- `self_critique`: DEFAULT_CRITIQUE_TEMPLATE (a request of its own: the question and the answer),
  then DEFAULT_CRITIQUE_COMPLETION_TEMPLATE added to the conversation as a user message, and
  the model answers again.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

SINGLE_ANSWER_TEMPLATE = r"""
Answer the following multiple choice question. The entire content of your response should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of {letters}.

{question}

{choices}
""".strip()

DEFAULT_COT_TEMPLATE = r"""
{prompt}

Before answering, reason in a step-by-step manner as to get the right answer. Provide your answer at the end on its own line in the form "ANSWER: $ANSWER" (without quotes) where $ANSWER is the answer to the question.
"""

DEFAULT_CRITIQUE_TEMPLATE = r"""
Given the following question and answer, please critique the answer. A good answer comprehensively answers the question and NEVER refuses to answer. If the answer is already correct do not provide critique - simply respond 'The original answer is fully correct'.

[BEGIN DATA]
***
[Question]: {question}
***
[Answer]: {completion}
***
[END DATA]

Critique: """

DEFAULT_CRITIQUE_COMPLETION_TEMPLATE = r"""
Given the following question, initial answer and critique please generate an improved answer to the question:

[BEGIN DATA]
***
[Question]: {question}
***
[Answer]: {completion}
***
[Critique]: {critique}
***
[END DATA]

If the original answer is already correct, just repeat the original answer exactly. Provide your answer at the end on its own line in the form "ANSWER: $ANSWER" (without quotes) where $ANSWER is the answer to the question.
"""


def answer_character(index: int) -> str:
    """0 → 'A', …, 25 → 'Z', then '1', '2', … (Inspect's `answer_character`)."""
    return chr(ord("A") + index) if index < 26 else str(index - 25)


def answer_index(char: str) -> int:
    """The inverse of `answer_character` (Inspect's `answer_index`); ValueError for another character."""
    if char.isalpha():
        return ord(char.upper()) - ord("A")
    if char.isnumeric():
        return 25 + int(char)
    raise ValueError(f"unexpected multiple choice answer: {char}")


def shuffled_order(index: int, options: int) -> tuple[int, ...]:
    """The record's option shown at each place when sample `index` is shuffled: its own fixed
    draw (random.Random(index)), the same in every epoch, run and resume."""
    order = list(range(options))
    random.Random(index).shuffle(order)
    return tuple(order)


def multiple_choice_prompt(question: str, options: Sequence[str]) -> str:
    """SINGLE_ANSWER_TEMPLATE filled (Inspect's `prompt` and `answer_options`), `options` in the order shown."""
    lettered = "\n".join(f"{answer_character(i)}) {text}" for i, text in enumerate(options))
    letters = ",".join(answer_character(i) for i in range(len(options)))
    return SINGLE_ANSWER_TEMPLATE.format(choices=lettered, letters=letters, question=question)


def chain_of_thought(prompt: str) -> str:
    return DEFAULT_COT_TEMPLATE.format(prompt=prompt)


def critique_prompt(question: str, completion: str) -> str:
    return DEFAULT_CRITIQUE_TEMPLATE.format(question=question, completion=completion)


def revision_prompt(question: str, completion: str, critique: str) -> str:
    return DEFAULT_CRITIQUE_COMPLETION_TEMPLATE.format(question=question, completion=completion, critique=critique)


_STRICT = re.compile(r"(?i)^ANSWER\s*:\s*([A-Za-z\d ,]+)\s*(?:$|\n|\.)", re.MULTILINE)
_LOOSE = re.compile(r"(?i)ANSWER\s*:\s*([A-Za-z\d ,]+)(?:[^\w]|\n|$|\.)")


def parse_answer(completion: str, options: int) -> str | None:
    """The one letter a reply answers with, read as Inspect's `parse_answers(multiple_correct=False)`
    reads it (a line `ANSWER: X`, the last one; else `ANSWER: X` anywhere); None when there is
    none, or it is not one of the `options` letters."""
    matches = _STRICT.findall(completion) or _LOOSE.findall(completion)
    if not matches:
        return None
    matched = matches[-1].strip().rstrip(".").upper()
    tokens = [t for t in matched.split(",") if t]
    allowed = {answer_character(i) for i in range(options)}
    return tokens[0] if len(tokens) == 1 and tokens[0] in allowed else None


def unshuffled(completion: str, order: Sequence[int]) -> str:
    """A reply to shuffled options as "ANSWER: <the letter of that option in the record>"
    (Inspect's `pretend_we_didnt_shuffle`); "" when no letter can be read in it: a letter read
    any other way would be the shuffled one, and so counted against the wrong option."""
    letter = parse_answer(completion, len(order))
    if letter is None:
        return ""
    return f"ANSWER: {answer_character(order[answer_index(letter)])}"
