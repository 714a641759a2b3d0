"""Where a model stopped answering: what the answer-reading evaluators (gsm8k, math, choice) agree on.

A base model that has answered often goes on to write the next few-shot question and answer it
too ("… #### 8\\n\\nQuestion: Tom has 3 … #### 11"). The reply's own answer is before that
question, so everything from the first such question after the reply's first answer mark is
not read. A second thought within the reply ("The answer is 16. Wait … The answer is 18.") is
not a new question: there the last mark wins.
"""

from __future__ import annotations

import re

# A new question: "Question:", "Q:", "Problem 2:", "Human:", "User:" opening a line, or "Next question:".
_FOLLOW_UP_RE = re.compile(
    r"^[ \t>*#]*(?:Question|Problem|Q|Human|User)[ \t]*\d*[ \t]*[:：]|\bNext question[ \t]*[:：]", re.MULTILINE
)


_FOLLOW_UP_WORDS = ("Q", "Problem", "Human", "User", "ext question")


def may_follow_up(text: str) -> bool:
    """Whether `text` holds a word a follow-up question opens with (the usual reply does not)."""
    return any(word in text for word in _FOLLOW_UP_WORDS)


def first_follow_up(text: str, after: int) -> int | None:
    """Where the first invented follow-up question at or after `after` begins; None when there is none."""
    if not may_follow_up(text):  # the usual reply: no regex scan
        return None
    match = _FOLLOW_UP_RE.search(text, after)
    return match.start() if match else None
