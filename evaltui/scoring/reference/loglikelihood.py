"""lm-evaluation-harness 0.4.13's multiple-choice metrics, from each choice's log-likelihood.

As `ConfigurableTask.process_results` computes them for `output_type: multiple_choice`: `acc`
is right when the choice with the highest log-likelihood sum is the gold one; `acc_norm` divides
each sum by its choice's length in characters (the choice as `doc_to_choice` gives it, without
the target delimiter lm-eval puts before it in the continuation) — lm-eval's `acc_bytes` is the
one over bytes; and TruthfulQA's `mc2` (its `process_results_mc2`, reported as `acc`) is the
probability mass of the true answers, which come first: exp of each sum, normalised over all of
them, in its own arithmetic (where every exp underflows — lm-eval's NaN — the masses are taken
relative to the largest).

A tie goes to the first choice, as numpy's argmax gives it. The gold is an index (`doc_to_target`
as a number), or the text of a choice; for `mc2`, how many of the first choices are true.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evaltui.scoring.judgement import ScoredJudge, Verdict

#: The name each metric is reported under: lm-eval reports truthfulqa_mc2's as `acc`.
REPORTED = {"acc": "acc", "acc_norm": "acc_norm", "mc2": "acc"}


def argmax(values: Sequence[float]) -> int:
    """numpy's argmax: the first NaN if there is one, else the first largest."""
    for i, v in enumerate(values):
        if math.isnan(v):
            return i
    return max(range(len(values)), key=values.__getitem__)


def _per_char(ll: float, chars: int) -> float:
    if chars:
        return ll / chars
    return math.nan if ll == 0 else math.copysign(math.inf, ll)  # numpy's float division by zero


def gold_index(gold: str, continuations: Sequence[str], delimiter: str) -> int:
    """The gold choice's index: a number as it is, else the choice whose text it is (-100: none)."""
    text = gold.strip()
    if text.isdigit():
        return int(text)
    for i, c in enumerate(continuations):
        if gold in (c, c[len(delimiter):] if c.startswith(delimiter) else c):
            return i
    return -100


def mc2(lls: Sequence[float], true_count: int) -> float:
    """The true answers' share of the probability mass over all the choices, in lm-eval's
    arithmetic (exp of each, Python's left-to-right sums, each true mass divided, then summed);
    where every exp underflows (lm-eval: 0/0, NaN) the masses are taken relative to the largest."""
    mass = [math.exp(ll) for ll in lls]
    total = sum(mass[:true_count]) + sum(mass[true_count:])
    if not total or not math.isfinite(total):
        top = max(lls)
        mass = [math.exp(ll - top) for ll in lls]
        total = sum(mass[:true_count]) + sum(mass[true_count:])
    return sum(m / total for m in mass[:true_count])


def make_loglikelihood(evaluator: Any) -> ScoredJudge:
    """The judge of a `loglikelihood` evaluator: `metrics` (acc, acc_norm, mc2), the first main."""
    metrics = list(getattr(evaluator, "metrics", None) or ["acc"])
    delimiter = str(getattr(evaluator, "target_delimiter", " "))

    def judge(prediction: str, gold: str, entry: dict[str, Any]) -> Verdict:
        lls, continuations = entry.get("ll"), entry.get("choices")
        if not isinstance(lls, list) or not isinstance(continuations, list) or not lls or len(lls) != len(continuations):
            return Verdict(None, False, {REPORTED[m]: 0.0 for m in metrics})
        sums = [float(v) for v in lls]
        pick = argmax(sums)
        scores: dict[str, Any] = {}
        for m in metrics:
            if m == "mc2":
                scores[REPORTED[m]] = mc2(sums, int(gold) if gold.strip().isdigit() else 0)
                continue
            if m == "acc_norm":
                chars = [len(c[len(delimiter):] if delimiter and c.startswith(delimiter) else c) for c in continuations]
                chosen = argmax([_per_char(ll, n) for ll, n in zip(sums, chars, strict=True)])
            else:
                chosen = pick
            scores[REPORTED[m]] = 1.0 if chosen == gold_index(gold, continuations, delimiter) else 0.0
        main = scores[REPORTED[metrics[0]]]
        return Verdict(str(continuations[pick]), main >= 0.5 if metrics[0] == "mc2" else main == 1.0, scores)

    return judge
