"""Text normalisation shared by the string-comparing evaluators.

Models decorate answers they got right: a capital letter, a full stop, quotes, a stray
newline.  Comparing the raw strings would count those as wrong, so every string evaluator
compares what is left after this normalisation.
"""

from __future__ import annotations

import re

_WHITESPACE = re.compile(r"\s+")
_QUOTE_PAIRS = (('"', '"'), ("'", "'"), ("`", "`"), ("\u201c", "\u201d"), ("\u2018", "\u2019"))


def normalize(text: object) -> str:
    """Strip, casefold, collapse whitespace, drop trailing full stops and surrounding quotes.

    Quotes and full stops can nest (`"Paris."` or `'Paris'.`), so peeling is repeated until
    nothing changes; every pass shortens the text, which bounds the loop by its length.
    A plain word or number (the usual short answer) has nothing to strip or peel, and takes
    the shortcut: scoring calls this twice per sample, millions of times on a large dataset.
    """
    if isinstance(text, str) and text.isalnum():
        return text.casefold()
    s = _WHITESPACE.sub(" ", str(text)).strip().casefold()
    for _ in range(len(s) + 1):
        before = s
        s = s.rstrip(".").strip()
        for left, right in _QUOTE_PAIRS:
            if len(s) >= 2 and s.startswith(left) and s.endswith(right):
                s = s[len(left) : -len(right)].strip()
                break
        if s == before:
            break
    return s
