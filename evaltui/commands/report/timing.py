"""The run's requests over time, per model, from the records' answered attempts: the latency
profile (latency.py: percentiles, time to first token, throughput) and the series the
page draws — answers per second, their median latency and tokens per second, in BINS stretches
from the first request to the last.

A record's answered attempt is its last one with outcome `ok` (when it was sent, how long it
took); a record without attempts (the log was off) counts by its own time and took. Kept as
arrays of floats per model (a few dozen bytes a request) until the end, when they are sorted
by end time: the profile's busy time needs them in order, the bins need the run's span.
"""

from __future__ import annotations

import math
from array import array
from statistics import median
from typing import Any

from evaltui.latency import LatencyProfile, ProfileSnapshot

BINS = 60


class _Series:
    __slots__ = ("start", "seconds", "tokens", "ttft", "itl")

    def __init__(self) -> None:
        self.start, self.seconds, self.tokens = array("d"), array("d"), array("d")
        self.ttft, self.itl = array("d"), array("d")  # NaN: not streamed

    def ends(self) -> list[int]:
        """Positions in the order the requests ended."""
        return sorted(range(len(self.start)), key=lambda k: self.start[k] + self.seconds[k])


def answered(record: dict[str, Any]) -> tuple[float, float] | None:
    """(sent at, seconds) of the record's answered attempt; None for a failed or untimed one."""
    if record.get("error") is not None:
        return None
    for a in reversed(record.get("attempts") or []):
        if isinstance(a, dict) and a.get("outcome") == "ok" and isinstance(a.get("at"), (int, float)) and isinstance(a.get("seconds"), (int, float)):
            return float(a["at"]), float(a["seconds"])
    at, took = record.get("time"), record.get("took")
    if isinstance(at, (int, float)) and isinstance(took, (int, float)):
        return float(at), float(took)
    return None


class Timing:
    def __init__(self) -> None:
        self._models: dict[str, _Series] = {}

    def add(self, model: str, record: dict[str, Any]) -> None:
        when = answered(record)
        if when is None:
            return
        s = self._models.get(model)
        if s is None:
            s = self._models[model] = _Series()
        usage = record.get("usage")
        tokens = usage.get("completion_tokens", 0) if isinstance(usage, dict) else 0
        s.start.append(when[0])
        s.seconds.append(when[1])
        s.tokens.append(float(tokens) if isinstance(tokens, (int, float)) else 0.0)
        s.ttft.append(float(record["ttft"]) if isinstance(record.get("ttft"), (int, float)) else math.nan)
        s.itl.append(float(record["itl"]) if isinstance(record.get("itl"), (int, float)) else math.nan)

    def profiles(self) -> dict[str, ProfileSnapshot]:
        out = {}
        for model, s in self._models.items():
            profile = LatencyProfile()
            for k in s.ends():
                ttft, itl = s.ttft[k], s.itl[k]
                profile.add(s.start[k], s.seconds[k], int(s.tokens[k]), None if math.isnan(ttft) else ttft, None if math.isnan(itl) else itl)
            out[model] = profile.snapshot()
        return out

    def timeline(self, bins: int = BINS) -> dict[str, Any]:
        """{"start": Unix time, "width": seconds a bin, "models": {model: {"rate", "p50", "tokens"}}}:
        per bin, answers per second, their median latency (None: none ended there) and tokens per second."""
        spans = [(min(s.start), max(a + b for a, b in zip(s.start, s.seconds, strict=True))) for s in self._models.values() if s.start]
        if not spans:
            return {"start": None, "width": 0, "models": {}}
        t0, t1 = min(a for a, _ in spans), max(b for _, b in spans)
        width = max((t1 - t0) / bins, 1.0)
        n = min(bins, int((t1 - t0) / width) + 1)
        models = {}
        for model, s in self._models.items():
            latencies: list[list[float]] = [[] for _ in range(n)]
            tokens = [0.0] * n
            for a, b, tok in zip(s.start, s.seconds, s.tokens, strict=True):
                k = min(n - 1, int((a + b - t0) / width))
                latencies[k].append(b)
                tokens[k] += tok
            models[model] = {
                "rate": [round(len(xs) / width, 3) for xs in latencies],
                "p50": [round(median(xs), 4) if xs else None for xs in latencies],
                "tokens": [round(t / width, 2) for t in tokens],
            }
        return {"start": t0, "width": width, "models": models}
