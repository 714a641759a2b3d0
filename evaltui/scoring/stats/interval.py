"""A metric's standard error and 95 % interval, accumulated one sample at a time.

As Inspect AI's `stderr()` with its `cluster` set to the sample: a dataset of K epochs has K
correlated verdicts per sample, so the sample (not the verdict) is the unit that varies. With
every sample's K epochs present, that clustered standard error is exactly the plain one over the
per-sample (reduced) values, sd(values, ddof=1) / √n — which is what is computed here, over the
value each reducer gives a sample (the mean of its epochs, pass@k, ...). The interval is Inspect's
`ci()` with `method="t"`: the mean ± t(0.975, n − 1) × the standard error.

A metric that is a ratio of sums (lm-eval's acc_norm-style `[right, of]` values) gets the
linearised (delta-method) standard error of a ratio estimator, which is the plain one above when
every `of` is 1. Everything is in the metric's own unit: percent for evaltui's metrics.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, TypeGuard

LEVEL = 0.95


class Interval(NamedTuple):
    """A metric's uncertainty: its standard error, its 95 % interval and the samples behind it."""

    stderr: float
    low: float
    high: float
    n: int

    @property
    def half(self) -> float:
        """The interval's half-width: what the leaderboard shows after `±`."""
        return (self.high - self.low) / 2

    def as_json(self) -> dict[str, object]:
        return {"stderr": self.stderr, "ci95": [self.low, self.high], "n": self.n}

    @classmethod
    def from_json(cls, data: object) -> Interval | None:
        """A result file's entry read back; None for anything else (an older file has none)."""
        if not isinstance(data, dict):
            return None
        stderr, ci, n = data.get("stderr"), data.get("ci95"), data.get("n")
        low, high = ci if isinstance(ci, list) and len(ci) == 2 else (None, None)
        if not (_is_number(stderr) and _is_number(low) and _is_number(high) and isinstance(n, int)):
            return None
        return cls(float(stderr), float(low), float(high), n)


def _is_number(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile: the t with P(T ≤ t) = p for `df` degrees of freedom.

    mpmath's regularised incomplete beta gives the distribution function (for t ≥ 0, F(t) =
    1 − I_x(df/2, 1/2) / 2 with x = df / (df + t²)), its root finder the quantile. Each call has
    a context of its own: mpmath's shared `mp` keeps its working precision in one global that
    findroot raises and lowers, so two datasets scored at once in two threads broke each other's
    root search ("Could not find root within given tolerance": a run's scoring FAILED by chance)."""
    if not 0.5 <= p < 1 or df < 1:
        raise ValueError(f"t quantile of p = {p} with {df} degrees of freedom: needs 0.5 ≤ p < 1 and df ≥ 1")
    if p == 0.5:
        return 0.0
    import mpmath  # type: ignore[import-untyped]  # (no stubs) a scoring thread's import, ~50 ms once

    ctx = mpmath.MPContext()

    def excess(t: float) -> float:
        return float(1 - ctx.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True) / 2 - p)

    normal = 1.959964 if p == LEVEL else 2.0
    return float(ctx.findroot(excess, normal + 2.5 / df))


class MeanSpread:
    """Sums enough to give a mean (a ratio of sums) its standard error, one sample at a time."""

    __slots__ = ("n", "_r", "_o", "_rr", "_oo", "_ro")

    def __init__(self) -> None:
        self.n = 0
        self._r = self._o = self._rr = self._oo = self._ro = 0.0

    def add(self, value: float, of: float = 1.0) -> None:
        """One sample's value (a ratio metric's: its numerator, with `of` its denominator)."""
        self.n += 1
        self._r += value
        self._o += of
        self._rr += value * value
        self._oo += of * of
        self._ro += value * of

    def interval(self, scale: float = 100.0, digits: int = 4) -> Interval | None:
        """The mean's uncertainty in `scale` units (percent by default); None under 2 samples
        or with nothing to divide by (an interval is undefined there)."""
        n = self.n
        if n < 2 or self._o <= 0:
            return None
        ratio = self._r / self._o
        residuals = max(0.0, self._rr - 2 * ratio * self._ro + ratio * ratio * self._oo)
        stderr = math.sqrt(residuals * n / (n - 1)) / self._o
        half = t_quantile((1 + LEVEL) / 2, n - 1) * stderr
        mean = scale * ratio
        return Interval(round(scale * stderr, digits), round(mean - scale * half, digits), round(mean + scale * half, digits), n)
