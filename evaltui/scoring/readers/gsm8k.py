"""GSM8K: the number a worked solution settles on, compared numerically.

How a reply is read (README, "How each evaluator reads a reply"):
  1. LaTeX and typography are read as numbers: `2{,}125` and `2\\,125` are 2125, the minus
     sign `−` is `-`, `\\frac{36}{2}` is 36/2, `\\$` is `$`;
  2. an answer mark is `#### X` (to the end of its line), `\\boxed{X}`, `<answer>X</answer>`, or
     "the answer is X" / "Final answer: X" / "Answer: X" (to the end of its sentence), where a
     phrase counts only when a number follows it ("The answer is that …" does not);
  3. a question the model invented after answering is not read (`reply.first_follow_up`);
  4. the last mark wins ("The answer is 16. Wait … The answer is 18." is 18);
  5. in what a mark holds, the value after its last `=` is the answer ("The answer is 3 + 6 = 9."
     is 9); an expression without one ("3 + 6", `2^4`, `\\sqrt{324}`) is worked out by math-verify
     (the `math` evaluator's worker, started only then), else its first number is taken;
  6. no mark: the last number of the reply.
Numbers: "1,234", "$5", "-3" but not the "-" of "12 - 3" or "COVID-19", "1/2", and the mixed
number "2 1/2" (5/2). For the gold the number after the *last* `####` is used, as the
dataset writes exactly one at the end.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import NamedTuple

from ..judgement import Judgement
from .mathcheck import TIMED_OUT, WORKER_DIED, MathChecker
from .reply import first_follow_up

_GAVE_UP = (None, TIMED_OUT, WORKER_DIED)  # math-verify read nothing, or its worker gave up
# A mixed number "2 1/2"; a fraction "1/2" (not part of a date "12/25/2023"); an optional "$",
# then an integer with or without thousands commas ("1,234" but not "1, 2"), optional decimals.
_NUMBER_RE = re.compile(
    r"(?<![\d/.,])\d+[ \t]\d+/\d+(?![\d/])"
    r"|(?<![\d/])\d+/\d+(?![\d/])"
    r"|(?:\$\s*)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
)
_MARKER = "####"
# The marks, with what each holds: `####` to the end of its line, a box and a tag their content,
# a phrase to the end of its sentence.
_MARK_RE = re.compile(
    r"(?P<hashes>####)"
    r"|(?P<box>\\(?:boxed|fbox)\s*\{)"
    r"|(?P<tag><answer>)"
    r"|(?P<phrase>(?i:\b(?:final\s+)?answer(?:\s+(?:is|was|would\s+be|should\s+be|will\s+be|must\s+be)\b\s*[:：]?|\s*[:：]))|答案是?)"
)
_EQUALS_RE = re.compile(r"\s*(?:=|≈|\\approx)")
# Where a mark may begin: each word, and how far before it the mark starts ("nswer" of "Answer").
_MARK_WORDS = (("####", 0), ("\\boxed", 0), ("\\fbox", 0), ("<answer>", 0), ("nswer", 1), ("NSWER", 1), ("答案", 0))
_SENTENCE_END_RE = re.compile(r"[.!?;](?=\s|$)|\n")
# Where a phrase's number may stand: after markup and dollars only ("is **18**", "is $18", "is \\(18").
_LEADING_RE = re.compile(r"(?:\s|[-*$\[{]|\\\(|\\\$|\\(?:text\w*|boxed|mathbf|mathrm)\s*\{)*")
# Operators: what follows a number in an expression ("3 + 6", "2^4", "3 \\times 6").
_OPERATOR_RE = re.compile(r"\s*(?:[-+*/×÷^·]|\\times|\\cdot|\\div)\s*(?=[\d(]|\\(?:frac|sqrt|left))")
_EXPRESSION_START_RE = re.compile(r"\\sqrt|\\frac|\\left\(|\((?=\s*-?\d)")
_OPERATION_RE = re.compile(r"[+*/×÷^·]|(?<=[\d)}\s])-|\\(?:times|cdot|div|sqrt|frac|dfrac|tfrac)")
_EXPRESSION_RE = re.compile(r"(?:[\d.,+*/×÷^·(){}\s-]|\\(?:times|cdot|div|sqrt|frac|dfrac|tfrac|left|right))+")
_LATEX_OPERATORS = {"×": "\\times ", "÷": "\\div ", "·": "\\cdot "}


_THIN_SPACE_RE = re.compile(r"(?<=\d)\\[,!;: ](?=\d)")
_FRAC_RE = re.compile(r"\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}")
_SHORT_FRAC_RE = re.compile(r"\\[dt]?frac(\d)(\d)")


class Answer(NamedTuple):
    """What a reply's answer reads as: a number ("18", "1/2", "2 1/2"), or an expression ("3 + 6")."""

    text: str
    expression: bool = False


def _latex_number(text: str) -> str:
    """Numbers written in LaTeX or with typographic signs, as plain numbers."""
    text = text.replace("\u2212", "-").replace("{,}", ",")
    if "\\" not in text:  # the usual reply: nothing more to do
        return text
    text = text.replace("\\$", "$")
    text = _THIN_SPACE_RE.sub("", text)
    text = _FRAC_RE.sub(r"\1/\2", text)
    return _SHORT_FRAC_RE.sub(r"\1/\2", text)


def _signed(text: str, match: re.Match[str]) -> str:
    """The number as plain digits (no "$", thousands commas or spaces), with its minus sign.

    A "-" before the number, against it or a few spaces away, is its sign ("-3", "= -3", "is - 3",
    "\\boxed{- 3}"), unless it joins two words or numbers ("10-12", "COVID-19") or follows a number
    or a bracket it subtracts from ("12 - 3", "12 -3", "(4 + 8) - 3")."""
    value = match.group(0).replace("$", "").replace(",", "").strip()
    value = re.sub(r"\s+", " ", value)  # a mixed number keeps one space: "2 1/2"
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


def _box_content(text: str, start: int) -> str | None:
    """The content of the box whose "{" ends at `start`; None when it is never closed."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return None


def _held(text: str, mark: re.Match[str]) -> str | None:
    """What a mark holds: the rest of the line, the box's content, the tag's, the sentence."""
    end = mark.end()
    if mark.group("box"):
        return _box_content(text, end)
    if mark.group("tag"):
        close = text.find("</answer>", end)
        return text[end:] if close < 0 else text[end:close]
    if mark.group("hashes"):
        line_end = text.find("\n", end)
        return text[end:] if line_end < 0 else text[end:line_end]
    stop = _SENTENCE_END_RE.search(text, end)
    return text[end : stop.start() if stop else len(text)]


def _read(held: str, phrase: bool) -> Answer | None:
    """The answer in what a mark holds (see the module's doc, 5). A number that leads, with no
    operator or `=` after it, is the answer whatever follows ("18 (as 9 * 2 = 18)"); else the
    value after the last `=`. A phrase's number must lead (after markup), a box's need not."""
    answer = _leading(held, phrase=True)
    if answer is not None and not answer.expression and not _EQUALS_RE.match(held, answer.end):
        return answer.answer
    if _EQUALS_RE.search(held):
        held = _EQUALS_RE.split(held)[-1]
    answer = _leading(held, phrase)
    return answer.answer if answer else None


class _Found(NamedTuple):
    answer: Answer
    end: int

    @property
    def expression(self) -> bool:
        return self.answer.expression


def _leading(text: str, phrase: bool) -> _Found | None:
    """The number or expression `text` opens with (anywhere in it unless `phrase`)."""
    lead = _LEADING_RE.match(text)
    start = lead.end() if lead else 0
    if _EXPRESSION_START_RE.match(text, start):
        return _expression(text, start)
    number = _NUMBER_RE.search(text, start)
    if number is None or (phrase and number.start() != start):
        return None
    if _OPERATOR_RE.match(text, number.end()):
        return _expression(text, number.start())
    return _Found(Answer(_signed(text, number)), number.end())


def _expression(text: str, start: int) -> _Found | None:
    run = _EXPRESSION_RE.match(text, start)
    if run is None:
        return None
    expression = run.group(0).rstrip(" ,.")
    number = _NUMBER_RE.search(expression)
    if number is None:
        return None
    if not _OPERATION_RE.search(expression.replace(number.group(0), "", 1)):
        return _Found(Answer(_signed(expression, number)), start + number.end())  # "(18)": a number in brackets
    return _Found(Answer(expression.strip(), expression=True), start + len(expression))


def _marks(text: str) -> list[re.Match[str]]:
    """The answer marks of `text`, in order: `_MARK_RE` tried only where str.find puts one of its
    words (scanning every position with the regex cost ~50 µs of a GSM8K reply, 5 times the rest)."""
    starts: set[int] = set()
    for word, back in _MARK_WORDS:
        at = text.find(word)
        while at >= 0:
            starts.add(max(0, at - back))
            at = text.find(word, at + 1)
    return [m for m in (_MARK_RE.match(text, at) for at in sorted(starts)) if m]


def read_answer(text: str) -> Answer | None:
    """The answer a reply settles on (see the module's doc); None when it holds no number."""
    text = _latex_number(text)
    marks = _marks(text)
    first_number = _NUMBER_RE.search(text)
    begun = [m.start() for m in (marks[0] if marks else None, first_number) if m is not None]
    cut = first_follow_up(text, min(begun)) if begun else None  # a question after it began answering
    if cut is not None:
        text = text[:cut]
        marks = [m for m in marks if m.start() < cut]
    for mark in reversed(marks):
        held = _held(text, mark)
        answer = _read(held, phrase=bool(mark.group("phrase"))) if held is not None else None
        if answer is not None:
            return answer
    number = _last_number(text)
    return Answer(number) if number is not None else None


def extract_prediction_number(text: str) -> str | None:
    """The number a reply settles on (an expression's text when it settles on one)."""
    answer = read_answer(text)
    return answer.text if answer else None


def extract_gold_number(text: str) -> str | None:
    text = _latex_number(text)
    if _MARKER in text:
        number = _first_number(text.rsplit(_MARKER, 1)[1])
        if number is not None:
            return number
    return _last_number(text)


def _value(number: str) -> float:
    whole, _, fraction = number.rpartition(" ")
    if whole:  # a mixed number: "-2 1/2" is -(2 + 1/2)
        magnitude = abs(int(whole)) + Fraction(fraction)
        return float(-magnitude if whole.startswith("-") else magnitude)
    if "/" in number:
        return float(Fraction(number))  # ZeroDivisionError for "1/0"
    return float(number)


def numbers_equal(a: str, b: str) -> bool:
    """`18`, `18.0`, `18.00`, `36/2` are the same answer, `2 1/2` is 2.5; float noise is tolerated."""
    try:
        x, y = _value(a), _value(b)
    except (ValueError, ZeroDivisionError):
        return False
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6)


def _as_latex(expression: str) -> str:
    for sign, command in _LATEX_OPERATORS.items():
        expression = expression.replace(sign, command)
    return expression


def judge_gsm8k(prediction: str, gold: str, math_checker: MathChecker | None = None) -> Judgement:
    """The reply's answer against the gold's number; an expression is worked out by `math_checker`
    (math-verify), or without one (or when it gives up) read as its first number."""
    answer = read_answer(prediction)
    want = extract_gold_number(gold)
    if answer is None or want is None:
        return Judgement(answer.text if answer else None, False)
    if answer.expression and math_checker is not None:
        verdict = math_checker.judge("\\boxed{" + _as_latex(answer.text) + "}", want)
        if verdict.extracted not in _GAVE_UP:
            return Judgement(answer.text, verdict.correct)
    number = _first_number(answer.text) if answer.expression else answer.text
    return Judgement(answer.text, number is not None and numbers_equal(number, want))
