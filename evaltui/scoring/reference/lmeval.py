"""lm-evaluation-harness 0.4.13's generate-until scoring: its filters, then `exact_match`.

A task's `filter_list` names pipelines; each here is lm-eval's `regex` filter followed by
`take_first` (lm_eval/filters/extraction.py: `findall`, the `group_select`-th match, the first
non-empty group of a tuple, stripped; `fallback` when nothing matches), and each pipeline
reports `exact_match,<name>`. `exact_match` is lm_eval/api/metrics.py's
`exact_match_hf_evaluate`: `regexes_to_ignore` removed from both texts in order, then case
and punctuation ignored when the task says so, then equality.
"""

from __future__ import annotations

import re
import string
from typing import Any

from evaltui.scoring.judgement import ScoredJudge, Verdict

_PUNCTUATION = str.maketrans("", "", string.punctuation)


def regex_filter(text: str, pattern: re.Pattern[str], group_select: int = 0, fallback: str = "[invalid]") -> str:
    """What lm-eval's RegexFilter keeps of one reply."""
    found = pattern.findall(text)
    if not found:
        return fallback
    try:
        match = found[group_select]
    except IndexError:
        return fallback  # lm-eval would raise; no number of matches makes this reply right
    if isinstance(match, tuple):
        parts = [m for m in match if m]
        if not parts:
            return fallback
        match = parts[0]
    return str(match).strip()


def make_exact_match(evaluator: Any) -> ScoredJudge:
    """The judge of an `exact_match` evaluator: one metric per filter, the first one main."""
    filters = [
        (f"exact_match,{f.name}", re.compile(f.pattern), f.group_select, f.fallback) for f in (getattr(evaluator, "filters", None) or ())
    ]
    ignore = [re.compile(r) for r in (getattr(evaluator, "regexes_to_ignore", None) or ())]
    ignore_case = bool(getattr(evaluator, "ignore_case", False))
    ignore_punctuation = bool(getattr(evaluator, "ignore_punctuation", False))

    def normal(text: str) -> str:
        for rx in ignore:
            text = rx.sub("", text)
        if ignore_case:
            text = text.lower()
        if ignore_punctuation:
            text = text.translate(_PUNCTUATION)
        return text

    def judge(prediction: str, gold: str, entry: dict[str, Any]) -> Verdict:
        reference = normal(gold)
        if not filters:  # lm-eval's "none" pipeline: the reply as it is
            right = normal(prediction) == reference
            return Verdict(prediction, right, {"exact_match,none": float(right)})
        scores: dict[str, Any] = {}
        extracted = None
        for name, pattern, group, fallback in filters:
            kept = regex_filter(prediction, pattern, group, fallback)
            if extracted is None:
                extracted = kept
            scores[name] = 1.0 if normal(kept) == reference else 0.0
        return Verdict(extracted, scores[filters[0][0]] == 1.0, scores)

    return judge
