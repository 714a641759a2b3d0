"""The evaluators that compare normalised strings — exact, includes, regex and ppl — and lists of tool calls (tool_call_match)."""

from __future__ import annotations

import re
import unicodedata

from evaltui.conversation.tools import NotToolCalls, canonical, parse_calls

from .judgement import Judge, Judgement
from .normalize import normalize


def judge_exact(prediction: str, gold: str) -> Judgement:
    extracted = normalize(prediction)
    return Judgement(extracted, extracted == normalize(gold))


def _is_word_char(c: str) -> bool:
    """A letter or digit of a script that puts spaces between words: beside the answer, it makes
    the answer part of a longer word. Chinese, Japanese, Korean's particles, Thai, Lao, Khmer and
    Burmese join words without spaces: there a letter ends a word as well as a space does."""
    if not c.isalnum() or unicodedata.east_asian_width(c) in ("W", "F"):
        return False
    return not ("\u0e00" <= c <= "\u0eff" or "\u1000" <= c <= "\u109f" or "\u1780" <= c <= "\u17ff")


def _joined_before(text: str, start: int, first: str) -> bool:
    """Whether what precedes text[start:] makes it part of a longer word or number: a letter
    (`parisian` holds `paris`… at its end: `newparis`), a number's digits and separator (`3.5`,
    `1,500`) or its minus sign (`-7`; not the hyphen of `3-7`)."""
    if start == 0:
        return False
    c = text[start - 1]
    if _is_word_char(c) and _is_word_char(first):
        return True
    if not first.isdigit():
        return False
    if c in ".," and start >= 2 and text[start - 2].isdigit():
        return True
    return c == "-" and (start < 2 or not text[start - 2].isalnum())


def _joined_after(text: str, end: int, last: str) -> bool:
    """Whether what follows text[:end] makes it part of a longer word (`parisian`) or number (`42.5`, `7,000`)."""
    if end == len(text):
        return False
    c = text[end]
    if _is_word_char(c) and _is_word_char(last):
        return True
    return last.isdigit() and c in ".," and end + 1 < len(text) and text[end + 1].isdigit()


def _holds_words(text: str, words: str) -> bool:
    """Whether `words` stand in `text` as words of their own, not inside a longer word or number."""
    start = text.find(words)
    while start != -1:
        end = start + len(words)
        if not _joined_before(text, start, words[0]) and not _joined_after(text, end, words[-1]):
            return True
        start = text.find(words, start + 1)
    return False


def judge_includes(prediction: str, gold: str) -> Judgement:
    """Gold must appear inside the prediction, as words of their own: `paris` is not in
    "Parisian", nor `42` in "420" or "42.5", nor `7` in "-7".

    An empty reference is a substring of everything, which would make every answer right;
    it is compared for equality instead, so `""` only matches an empty answer.
    """
    extracted = normalize(prediction)
    want = normalize(gold)
    if not want:
        return Judgement(extracted, extracted == want)
    return Judgement(extracted, _holds_words(extracted, want))


def judge_ppl(prediction: str, gold: str) -> Judgement:
    """In ppl mode the prediction is already the lowest-perplexity candidate's text."""
    return judge_exact(prediction, gold)


def judge_tool_calls(prediction: str, gold: str) -> Judgement:
    """tool_call_match: the reply's tool calls (its answer, a JSON list of {name, arguments}) are
    the reference's — the same names with equal arguments, each as often, in any order. A reply
    in words is wrong (nothing extracted); so is any reply to a reference that is not tool calls."""
    try:
        answer = canonical(parse_calls(prediction))
    except NotToolCalls:
        return Judgement(None, False)
    try:
        reference = canonical(parse_calls(gold))
    except NotToolCalls:
        return Judgement(answer, False)
    return Judgement(answer, answer == reference)


def compile_pattern(pattern: str | None) -> re.Pattern[str]:
    """Fail early, once per dataset, with a message naming the bad pattern."""
    if pattern is None or pattern == "":
        raise ValueError("evaluator type 'regex' needs a non-empty 'pattern'")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"evaluator regex pattern {pattern!r} is not a valid regular expression: {exc}") from exc


def make_regex_judge(pattern: str | None) -> Judge:
    """Pull the answer out with the dataset's pattern: its first match's first group that took
    part (in `answer is (.+)|Answer: (.+)`, whichever matched), the whole match when it has no groups."""
    compiled = compile_pattern(pattern)

    def judge_regex(prediction: str, gold: str) -> Judgement:
        match = compiled.search(prediction)
        if match is None:
            return Judgement(None, False)
        extracted = next((g for g in match.groups() if g is not None), None) if compiled.groups else match.group(0)
        if extracted is None:  # no group took part (an optional one)
            return Judgement(None, False)
        return Judgement(extracted, normalize(extracted) == normalize(gold))

    return judge_regex
