"""A model's latency profile: how long its answered requests took (p50, p90, p99), and for
streamed ones the time to the first token and between tokens; its throughput.

The engine adds each answered attempt as it ends (about a microsecond: a run of millions keeps
a few kilobytes, not a list), the summary files and `--json` say the run's, `evaltui report`
builds the same from the per-sample log. Percentiles come from a DDSketch (DataDog's quantile
sketch: mergeable, so the profiles of a model's Ray actors add up, and within 1 % of the true
value whatever the distribution) rather than from a sorted list of every latency.

Throughput is over the time the model had requests out (`busy`): a run resumed the next day
does not count the night between.
"""

from __future__ import annotations

from typing import NamedTuple

from ddsketch import DDSketch

RELATIVE_ACCURACY = 0.01
QUANTILES = (0.5, 0.9, 0.99)


class Percentiles(NamedTuple):
    """Seconds; None when nothing was measured."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


class ProfileSnapshot(NamedTuple):
    requests: int = 0  # answered requests measured
    latency: Percentiles = Percentiles()  # each answered attempt, sent to whole reply
    ttft: Percentiles = Percentiles()  # streamed: sent to the first token
    itl: Percentiles = Percentiles()  # streamed: between tokens, each request's mean
    output_tokens: int = 0  # completion tokens of the answered requests (as the server counts, or the tokens streamed)
    streamed: int = 0  # of the requests, those streamed
    busy: float = 0.0  # seconds with at least one request out

    @property
    def requests_per_s(self) -> float | None:
        return self.requests / self.busy if self.busy > 0 else None

    @property
    def tokens_per_s(self) -> float | None:
        return self.output_tokens / self.busy if self.busy > 0 and self.output_tokens else None

    def as_json(self) -> dict[str, object]:
        """For `--json`, the summary and the report: seconds rounded to 0.1 ms."""

        def p(q: Percentiles) -> dict[str, float | None]:
            return {name: None if v is None else round(v, 4) for name, v in q._asdict().items()}

        out: dict[str, object] = {"requests": self.requests, "latency": p(self.latency), "output_tokens": self.output_tokens,
                                  "busy": round(self.busy, 3), "requests_per_s": _round(self.requests_per_s), "tokens_per_s": _round(self.tokens_per_s)}
        if self.streamed:
            out.update(streamed=self.streamed, ttft=p(self.ttft), itl=p(self.itl))
        return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


class LatencyProfile:
    __slots__ = ("_latency", "_ttft", "_itl", "requests", "streamed", "output_tokens", "_busy", "_start", "_end")

    def __init__(self) -> None:
        self._latency = DDSketch(RELATIVE_ACCURACY)
        self._ttft: DDSketch | None = None  # made at the first streamed request
        self._itl: DDSketch | None = None
        self.requests = self.streamed = self.output_tokens = 0
        self._busy = 0.0
        self._start = self._end = 0.0  # the stretch of time with requests out that is still open

    def add(self, started: float, seconds: float, tokens: int = 0, ttft: float | None = None, itl: float | None = None) -> None:
        """An answered attempt: when it was sent (wall clock), how long it took, the tokens it
        generated; streamed, its time to the first token and mean time between tokens. Attempts
        are added as they end (in the order of their ends, or near it)."""
        self.requests += 1
        self.output_tokens += tokens
        self._latency.add(max(seconds, 0.0))
        if ttft is not None:
            self.streamed += 1
            if self._ttft is None:
                self._ttft = DDSketch(RELATIVE_ACCURACY)
            self._ttft.add(max(ttft, 0.0))
        if itl is not None:
            if self._itl is None:
                self._itl = DDSketch(RELATIVE_ACCURACY)
            self._itl.add(max(itl, 0.0))
        self._stretch(started, started + seconds)

    def _stretch(self, start: float, end: float) -> None:
        """The union of the attempts' intervals, kept as closed time plus the stretch still open."""
        if self._end == 0.0:
            self._start, self._end = start, end
        elif start > self._end:  # nothing was out in between
            self._busy += self._end - self._start
            self._start, self._end = start, end
        else:
            self._start, self._end = min(self._start, start), max(self._end, end)

    def merge(self, other: LatencyProfile) -> None:
        """Another profile of the same model (a Ray actor's) added to this one. The busy time is
        the larger of the two: the actors' requests ran side by side, in the same stretch."""
        self.requests += other.requests
        self.streamed += other.streamed
        self.output_tokens += other.output_tokens
        self._latency.merge(other._latency)
        for name in ("_ttft", "_itl"):
            theirs = getattr(other, name)
            if theirs is None:
                continue
            if getattr(self, name) is None:
                setattr(self, name, DDSketch(RELATIVE_ACCURACY))
            getattr(self, name).merge(theirs)
        self._busy = max(self._busy + (self._end - self._start), other._busy + (other._end - other._start))
        self._start = self._end = 0.0

    def copy(self) -> LatencyProfile:
        """A copy that the engine's later requests do not change (what a ModelLoad carries)."""
        other = LatencyProfile()
        other.merge(self)
        other._busy, other._start, other._end = self._busy, self._start, self._end
        return other

    @property
    def busy(self) -> float:
        return self._busy + (self._end - self._start)

    def snapshot(self) -> ProfileSnapshot:
        return ProfileSnapshot(self.requests, _percentiles(self._latency), _percentiles(self._ttft), _percentiles(self._itl),
                               self.output_tokens, self.streamed, self.busy)


def _percentiles(sketch: DDSketch | None) -> Percentiles:
    if sketch is None or not sketch.count:
        return Percentiles()
    return Percentiles(*(sketch.get_quantile_value(q) for q in QUANTILES))
