"""A grouped benchmark's parts (MMLU's subjects, BBH's tasks): each part's metrics, and the group's.

A grouped dataset is one leaderboard row — the reference's aggregate — and its parts are
reported beside it (the result file's `parts`, the details screen, `evaltui show`, `--json`).
lm-eval weights each part by its size (`weight_by_size`), which is the mean over all the
samples: the dataset's own metrics. OpenCompass's summary averages the parts' scores instead
(`naive_average`): the evaluator's `aggregate = "parts"`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from evaltui.scoring.reducers import MetricSums, Reduction
from evaltui.scoring.stats import Interval

#: (part, ((metric, value), …)) in the parts' order: what events and files carry.
Parts = tuple[tuple[str, tuple[tuple[str, "float | None"], ...]], ...]


class PartSums:
    """Each part's metrics, accumulated one detail at a time; `part_of(index)` names a sample's part."""

    def __init__(self, reduction: Reduction, part_of: Callable[[int], str | None]):
        self.reduction = reduction
        self.part_of = part_of
        self._sums: dict[str, MetricSums] = {}

    def add(self, detail: dict[str, Any]) -> None:
        index = detail.get("index")
        part = self.part_of(index) if isinstance(index, int) else None
        if part:
            sums = self._sums.get(part)
            if sums is None:
                sums = self._sums[part] = MetricSums(self.reduction)
            sums.add(detail)

    def result(self) -> dict[str, dict[str, Any]]:
        """{part: {metric: percent, …, "samples": n, "uncertainty": {…}}}, in the order the parts came."""
        out: dict[str, dict[str, Any]] = {}
        for part, sums in self._sums.items():
            uncertainty = sums.uncertainty()
            out[part] = {**sums.result(), "samples": sums.count, **({"uncertainty": uncertainty} if uncertainty else {})}
        return out

    def mean_intervals(self, means: dict[str, float]) -> dict[str, Interval]:
        """The uncertainty of the parts' unweighted means (`means`, aggregate = "parts"): the mean of
        independent estimates, its standard error √(Σ seᵢ²) / k and half-width √(Σ hᵢ²) / k; none
        for a metric some part has no interval of."""
        out: dict[str, Interval] = {}
        for metric, mean in means.items():
            found = [sums.intervals().get(metric) for sums in self._sums.values()]
            if not found or any(i is None for i in found):
                continue
            held = [i for i in found if i is not None]
            k = len(held)
            stderr = math.sqrt(math.fsum(i.stderr**2 for i in held)) / k
            half = math.sqrt(math.fsum(i.half**2 for i in held)) / k
            out[metric] = Interval(round(stderr, 4), round(mean - half, 4), round(mean + half, 4), sum(i.n for i in held))
        return out


def mean_of_parts(parts: dict[str, dict[str, Any]], metrics: tuple[str, ...]) -> dict[str, float]:
    """Each metric's unweighted mean over the parts (OpenCompass's naive_average), in percent."""
    return {m: round(math.fsum(p[m] for p in parts.values()) / len(parts), 2) if parts else 0.0 for m in metrics}


def as_parts(parts: Any, metrics: tuple[str, ...]) -> Parts:
    """A result file's `parts` as events carry them (what is not a number, None)."""
    if not isinstance(parts, dict):
        return ()
    out = []
    for name, values in parts.items():
        if isinstance(values, dict):
            out.append((str(name), tuple((m, _number(values.get(m))) for m in (*metrics, "samples"))))
    return tuple(out)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value  # a count stays an integer
