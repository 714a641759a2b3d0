"""The evaluators that compare normalised strings: exact, includes, regex and ppl."""

from __future__ import annotations

import re

from .judgement import Judge, Judgement
from .normalize import normalize


def judge_exact(prediction: str, gold: str) -> Judgement:
    extracted = normalize(prediction)
    return Judgement(extracted, extracted == normalize(gold))


def judge_includes(prediction: str, gold: str) -> Judgement:
    """Gold must appear inside the prediction.

    An empty reference is a substring of everything, which would make every answer right;
    it is compared for equality instead, so `""` only matches an empty answer.
    """
    extracted = normalize(prediction)
    want = normalize(gold)
    if not want:
        return Judgement(extracted, extracted == want)
    return Judgement(extracted, want in extracted)


def judge_ppl(prediction: str, gold: str) -> Judgement:
    """In ppl mode the prediction is already the lowest-perplexity candidate's text."""
    return judge_exact(prediction, gold)


def compile_pattern(pattern: str | None) -> re.Pattern[str]:
    """Fail early, once per dataset, with a message naming the bad pattern."""
    if pattern is None or pattern == "":
        raise ValueError("evaluator type 'regex' needs a non-empty 'pattern'")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"evaluator regex pattern {pattern!r} is not a valid regular expression: {exc}") from exc


def make_regex_judge(pattern: str | None) -> Judge:
    """Pull the answer out with the dataset's pattern (its first group when it has groups)."""
    compiled = compile_pattern(pattern)

    def judge_regex(prediction: str, gold: str) -> Judgement:
        match = compiled.search(prediction)
        if match is None:
            return Judgement(None, False)
        extracted = match.group(1) if compiled.groups else match.group(0)
        if extracted is None:  # the first group is optional and did not take part
            return Judgement(None, False)
        return Judgement(extracted, normalize(extracted) == normalize(gold))

    return judge_regex
