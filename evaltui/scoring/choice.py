"""Multiple choice: find the option letter (A-Z) a free-text answer settles on.

Precedence, first hit wins:
  1. an explicit statement: "answer is (C)", "The answer would be C", "Answer: C",
     "correct option is C", "答案是 C" (the first such statement: a base model that keeps
     generating after answering goes on to ask and answer a new question);
  2. a reply that is only the letter: "D", "(D)", "D.", "D)", "D:";
  3. a reply that opens with the letter as a label: "B. Paris", "B) Paris", "(B) Paris";
  4. else the last capital letter standing alone between punctuation or line boundaries,
     as in "... so it must be (B)" or "I'd go with B." - a letter followed by a word ("A dog",
     "Option B is") is not taken, nor "I" unless bracketed, nor letters of "U.S.".
Markdown emphasis (`**C**`, backticks) is removed first.  A reply with no letter gives None.
The letter must be a capital; only the surrounding words are matched case-insensitively.
"""

from __future__ import annotations

import re

from .judgement import Judgement

_LETTER_END = r"(?![A-Za-z0-9])"
_EXPLICIT_RE = re.compile(
    r"(?i:\banswer(?:\s+(?:is|would\s+be|should\s+be|will\s+be|must\s+be))?"
    r"|\b(?:correct|right|best)\s+(?:option|choice)(?:\s+is)?"
    r"|答案\s*(?:是|为)?)"
    r"\s*[:：]?\s*(?i:option\s+|choice\s+)?[(\[]?\s*([A-Z])\s*[)\]]?" + _LETTER_END
)
_ONLY_RE = re.compile(r"\A\s*[(\[]?\s*([A-Z])\s*[)\]]?\s*[.:)]?\s*\Z")
_LEADING_RE = re.compile(r"\A\s*(?:[(\[]\s*([A-Z])\s*[)\]]|([A-Z])[.)])(?=\s|\Z)")
# Left: line start, whitespace, an opening bracket or quote.  Right: a closing bracket,
# a quote, sentence punctuation not followed by more letters, or the end of the line.
_STANDALONE_RE = re.compile(
    r"(?:^|(?<=[\s(\[\"']))([A-Z])(?=[)\]\"']|[.,:;!?](?![A-Za-z0-9])|[ \t]*$)", re.MULTILINE
)
_MARKUP_RE = re.compile(r"[*`]")
_GOLD_RE = re.compile(r"\A\s*[(\[]?\s*([A-Za-z])\s*[)\]]?\s*[.:)]?\s*\Z")


def extract_choice(text: str) -> str | None:
    text = _MARKUP_RE.sub("", text)
    for regex in (_EXPLICIT_RE, _ONLY_RE, _LEADING_RE):
        match = regex.search(text)
        if match:
            return next(group for group in match.groups() if group)
    found = None
    for match in _STANDALONE_RE.finditer(text):
        letter = match.group(1)
        start = match.start(1)
        bracketed = start > 0 and text[start - 1] in "(["
        if letter == "I" and not bracketed:
            continue
        found = letter
    return found


def gold_letter(gold: str) -> str | None:
    """References are written "C", "c", "(C)" or "C." - or occasionally as a sentence."""
    match = _GOLD_RE.match(gold)
    if match:
        return match.group(1).upper()
    return extract_choice(gold)


def judge_choice(prediction: str, gold: str) -> Judgement:
    extracted = extract_choice(prediction)
    want = gold_letter(gold)
    return Judgement(extracted, extracted is not None and extracted == want)
