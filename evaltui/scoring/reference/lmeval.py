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
from collections.abc import Callable
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


Step = Callable[[str], str]


def _step(step: Any) -> Step:
    """One filter step as a function of the text: lm-eval's regex, remove_whitespace (strip),
    lowercase, uppercase."""
    if step.function == "regex":
        pattern, group, fallback = re.compile(step.pattern or ""), step.group_select, step.fallback
        return lambda text: regex_filter(text, pattern, group, fallback)
    simple: dict[str, Step] = {"remove_whitespace": lambda t: t.strip(), "lowercase": lambda t: t.lower(), "uppercase": lambda t: t.upper()}
    return simple[step.function]


def _pipeline(f: Any) -> Step:
    steps = [_step(s) for s in f.pipeline()]

    def run(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return run


def make_exact_match(evaluator: Any) -> ScoredJudge:
    """The judge of an `exact_match` evaluator: one metric per filter, the first one main."""
    filters = [(f"exact_match,{f.name}", _pipeline(f)) for f in (getattr(evaluator, "filters", None) or ())]
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
        for name, run in filters:
            kept = run(prediction)
            if extracted is None:
                extracted = kept
            scores[name] = 1.0 if normal(kept) == reference else 0.0
        return Verdict(extracted, scores[filters[0][0]] == 1.0, scores)

    return judge
