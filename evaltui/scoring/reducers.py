"""Epochs reduced to one score per sample, and the dataset's metrics from those (Inspect AI's reducers).

A dataset run for K epochs judges each sample K times; its reducer turns the K verdicts into one
value in [0, 1] (several for `pass_at_k` with several k), and a dataset metric is the mean of
that value over its samples, in percent. With one epoch and `mean` nothing is reduced and the
details keep the shape they always had (`Reduction.trivial`).

Metric names: `mean` keeps the evaluator's own (`accuracy`; `pass@1` for code_exec, of which the
mean over n epochs is the unbiased estimate); `pass_at_k` names one metric per k (`pass@10`);
the others say how they reduced (`accuracy_max`, `accuracy_at_least_2`; `pass_max` for code).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from evaltui.plan.evaluator import EVALUATORS, Epochs

from .stats import Interval, MeanSpread

#: Evaluators whose judges score each sample by several metrics (`scores` in every detail).
SCORED_TYPES = ("exact_match", "loglikelihood", "ifeval", "model_graded_qa", "model_graded_fact", "python", "mt_bench", "pairwise")
#: IFEval's metrics (lm-eval's names), the main one first; the inst_level ones are ratios over every instruction.
IFEVAL_METRICS = ("prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc", "inst_level_loose_acc")


def type_name(evaluator_type: Any) -> str:
    """Accept a plain string or a str-valued Enum."""
    return str(getattr(evaluator_type, "value", evaluator_type))


def main_metric(evaluator_type: Any) -> str:
    """The evaluator's own metric: what one epoch's verdicts average to."""
    name = type_name(evaluator_type)
    if name not in EVALUATORS:
        raise ValueError(f"unknown evaluator type {name!r}; expected one of {', '.join(EVALUATORS)}")
    own = {
        "code_exec": "pass@1", "exact_match": "exact_match,none", "loglikelihood": "acc", "ifeval": IFEVAL_METRICS[0],
        "mt_bench": "score", "pairwise": "win_rate",
    }
    return own.get(name, "accuracy")


def evaluator_metrics(evaluator: Any) -> tuple[str, ...]:
    """The metrics one epoch of an evaluator reports, its main one first: lm-eval's exact_match
    one per filter (`exact_match,strict-match`), as lm-eval's results name them."""
    name = type_name(getattr(evaluator, "type", None))
    if name == "exact_match":
        filters = getattr(evaluator, "filters", None) or ()
        return tuple(f"exact_match,{f.name}" for f in filters) or (main_metric(name),)
    if name == "ifeval":
        return IFEVAL_METRICS
    if name == "math" and getattr(evaluator, "extract", "answer") == "whole":
        return ("math_verify",)  # lm-eval's minerva_math metric
    if name == "mt_bench":  # the mean rating (1–10) of both turns, and each turn's
        return ("score", "turn_1", "turn_2")
    if name == "loglikelihood":  # lm-eval reports truthfulqa_mc2's value as acc
        return tuple(dict.fromkeys("acc" if m == "mc2" else m for m in getattr(evaluator, "metrics", None) or ["acc"]))
    return (main_metric(name),)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of Chen et al. (2021): 1 − C(n−c, k) / C(n, k), for c right of n tries.

    As their product form 1 − ∏_{i=n−c+1}^{n} (1 − k/i), which neither overflows nor loses
    precision to huge binomials (C(200, 100) has 59 digits)."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@{k} of {c} right in {n}: needs 0 < k ≤ n and 0 ≤ c ≤ n")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def _mode(values: Sequence[float]) -> float:
    """The most frequent value; a tie goes to the one seen first (epoch 0's side), as Counter keeps it."""
    return Counter(values).most_common(1)[0][0]


_SIMPLE: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": lambda v: math.fsum(v) / len(v),
    "max": max,
    "median": lambda v: float(statistics.median(v)),
    "mode": _mode,
}


class Reduction:
    """How one dataset's epochs become per-sample values and dataset metrics."""

    def __init__(self, evaluator_type: Any, reducer: str = "mean", ks: Sequence[int] = (), epochs: int = 1, bases: Sequence[str] = ()):
        """`bases`: the metrics one epoch reports, main first (default: the type's one)."""
        self.bases = tuple(bases) or (main_metric(evaluator_type),)
        self.base = self.bases[0]
        self.reducer = reducer
        self.ks = tuple(ks)
        self.epochs = epochs
        self.scored = type_name(evaluator_type) in SCORED_TYPES  # its details carry `scores` always
        self.trivial = epochs == 1 and reducer == "mean" and not self.scored
        self.metrics = self._names()

    @classmethod
    def of(cls, evaluator: Any, epochs: Epochs) -> Reduction:
        """From a dataset's evaluator (its type and metrics: an EvaluatorConfig or anything with
        the same fields) and its epochs (`Plan.epochs`: how many, by which reducer)."""
        return cls(getattr(evaluator, "type", None), epochs.reducer, epochs.ks, epochs.count, evaluator_metrics(evaluator))

    def _names(self) -> tuple[str, ...]:
        if self.reducer == "mean":
            return self.bases
        if self.reducer == "pass_at_k":
            return tuple(f"pass@{k}" for k in self.ks)
        word = "pass" if self.base == "pass@1" else self.base
        label = f"at_least_{self.ks[0]}" if self.reducer == "at_least_k" else self.reducer
        return (f"{word}_{label}",)

    @property
    def main(self) -> str:
        return self.metrics[0]

    def reduce(self, correct: Sequence[bool]) -> dict[str, float]:
        """Each metric's value for one sample from its epochs' verdicts (a failed epoch is wrong)."""
        values = [1.0 if c else 0.0 for c in correct]
        if self.reducer == "pass_at_k":
            right = sum(1 for c in correct if c)
            return {f"pass@{k}": pass_at_k(len(values), right, k) for k in self.ks}
        if self.reducer == "at_least_k":
            return {self.main: 1.0 if sum(values) >= self.ks[0] else 0.0}
        return {self.main: float(_SIMPLE[self.reducer](values))}

    def reduce_scores(self, scores: Sequence[dict[str, Any]], correct: Sequence[bool]) -> dict[str, Any]:
        """Each metric's value for one sample from its epochs' scores (several metrics an epoch):
        with `mean` every metric's mean over the epochs (a ratio metric, [right, of], its parts'
        means); another reducer reduces the main metric's verdicts as `reduce` does."""
        if self.reducer != "mean":
            return self.reduce(correct)
        out: dict[str, Any] = {}
        for name in self.bases:
            values = [s.get(name, 0.0) for s in scores]
            if values and isinstance(values[0], (list, tuple)):
                out[name] = [math.fsum(v[0] for v in values) / len(values), math.fsum(v[1] for v in values) / len(values)]
            else:
                out[name] = math.fsum(values) / len(values)
        return out


class MetricSums:
    """The dataset's metrics, accumulated one detail at a time (details stream past, never held)."""

    def __init__(self, reduction: Reduction):
        self.reduction = reduction
        self.count = 0
        self._sums = dict.fromkeys(reduction.metrics, 0.0)
        self._ratios: dict[str, list[float]] = {}  # a ratio metric's [right, of] summed over samples
        self._correct = 0
        self._spreads = {name: MeanSpread() for name in reduction.metrics}  # each metric's standard error

    def add(self, detail: dict[str, Any]) -> None:
        self.count += 1
        if self.reduction.trivial:
            right = bool(detail["correct"])
            self._correct += right
            self._spreads[self.reduction.main].add(1.0 if right else 0.0)
            return
        for name, value in detail["scores"].items():
            spread = self._spreads.get(name)
            if isinstance(value, (list, tuple)):
                parts = self._ratios.setdefault(name, [0.0, 0.0])
                parts[0] += value[0]
                parts[1] += value[1]
                if spread is not None:
                    spread.add(value[0], value[1])
            else:
                self._sums[name] += value
                if spread is not None:
                    spread.add(value)

    def intervals(self) -> dict[str, Interval]:
        """Each metric's standard error and 95 % interval, in percent (stats/interval.py); none
        for a metric of fewer than two samples."""
        found = {name: spread.interval() for name, spread in self._spreads.items()}
        return {name: interval for name, interval in found.items() if interval is not None}

    def uncertainty(self) -> dict[str, dict[str, Any]]:
        """The intervals as a result file's `uncertainty` holds them: {metric: {stderr, ci95, n}}."""
        return {name: interval.as_json() for name, interval in self.intervals().items()}

    def result(self) -> dict[str, float]:
        """{metric: percent rounded to 2 decimals}, the main metric first; 0.0 for no samples."""
        if self.reduction.trivial:
            return {self.reduction.main: percent(self._correct, self.count)}
        if not self.count:
            return dict.fromkeys(self.reduction.metrics, 0.0)
        out = {}
        for name, total in self._sums.items():
            right, of = self._ratios.get(name, (total, float(self.count)))
            out[name] = round(100.0 * right / of, 2) if of else 0.0
        return out


def percent(correct: int, total: int) -> float:
    return round(100.0 * correct / total, 2) if total else 0.0
