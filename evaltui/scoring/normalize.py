"""Text normalisation shared by the string-comparing evaluators.

Models decorate answers they got right: a capital letter, a full stop, quotes, markdown bold, a
leading "Answer:", a stray newline, fullwidth letters. Comparing the raw strings would count
those as wrong, so every string evaluator compares what is left after this normalisation.
"""

from __future__ import annotations

import re
import unicodedata

_WHITESPACE = re.compile(r"\s+")
# peeled from both ends, outermost first: quotes, inline code, markdown bold and italics (not
# `_`, which names hold: `__init__`; nor `~~`, which strikes an answer out)
_PAIRS = (('"', '"'), ("'", "'"), ("`", "`"), ("**", "**"), ("*", "*"))
_TRAILING = ".!?,;:\u3002"  # a sentence's end, and the ideographic full stop (NFKC keeps it)
# what NFKC keeps apart from its ASCII form: typographic quotes and apostrophes, dashes, the minus sign
_TYPOGRAPHIC = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"'}
    | dict.fromkeys(["\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2015", "\u2212"], "-")
)
# a label before the answer: "Answer:", "**Answer:**", "Final answer:", "The answer is:" (the colon makes it a label)
_LABEL = re.compile(r"^[*#\s]*(?:the\s+)?(?:final\s+)?answer(?:\s+is)?\s*\**\s*:\s*\**\s*")


def normalize(text: object) -> str:
    """NFKC, casefold, collapse whitespace; drop trailing full stops (and !?,;:), a leading
    "Answer:" label and surrounding quotes, backticks and markdown emphasis.

    Decorations can nest (`"Paris."`, `**Answer:** 'Paris'.`), so peeling is repeated until
    nothing changes; every pass shortens the text, which bounds the loop by its length.
    A plain ASCII word or number (the usual short answer) has nothing to strip or peel, and takes
    the shortcut: scoring calls this twice per sample, millions of times on a large dataset.
    """
    if isinstance(text, str) and text.isascii() and text.isalnum():
        return text.casefold()
    s = str(text)
    if not s.isascii():  # ASCII has nothing NFKC or the typographic table would change
        s = unicodedata.normalize("NFKC", s).translate(_TYPOGRAPHIC)
    s = _WHITESPACE.sub(" ", s).strip().casefold()
    for _ in range(len(s) + 1):
        before = s
        s = s.rstrip(_TRAILING).strip()
        if "answer" in s:
            s = _LABEL.sub("", s, count=1)
        for left, right in _PAIRS:
            if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left) : -len(right)].strip()
                break
        if s == before:
            break
    return s
