"""One model×dataset, one replica and one failure as the fold (state.py) keeps them.

A `PairState` holds a pair's counters, statuses, score and the rates derived from them; a
`ReplicaView` one replica's latest load and rate; a `Failure` one sample that failed for good.
The renderers read them; only `RunState.apply` changes them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.delta import Delta
from evaltui.engine.stream.events import Pair, PairStatus

if TYPE_CHECKING:
    from evaltui.scoring.stats import Interval

Clock = Callable[[], float]

# No rate over less than this many seconds: a renderer that folds events in batches (the app,
# five times a second) sees a start up to a batch late, and a burst of answers in no time at all.
RATE_MIN_SPAN = 1.0


class Failure(NamedTuple):
    model: str
    dataset: str
    sample_index: int
    error: ev.SampleError
    shard: int = 0
    epoch: int = 0


class KeptFailures(deque[Failure]):
    """RunState.failures: the newest failures (bounded), and how many of them each pair has, so
    that a pair planned or started again forgets its own without a walk of them all (which was
    up to 1,000 failures looked at for each of 10,000 datasets started)."""

    def __init__(self, maxlen: int) -> None:
        super().__init__(maxlen=maxlen)
        self._count: dict[Pair, int] = {}

    def append(self, f: Failure, /) -> None:
        if not self.maxlen:
            return  # none kept
        if len(self) == self.maxlen:  # the oldest is let go
            key = (self[0].model, self[0].dataset)
            left = self._count[key] - 1
            if left:
                self._count[key] = left
            else:
                del self._count[key]
        super().append(f)
        self._count[(f.model, f.dataset)] = self._count.get((f.model, f.dataset), 0) + 1

    def forget(self, model: str, dataset: str) -> bool:
        """Let go of the pair's failures; the others stay, in their order. Whether it had any."""
        if self._count.pop((model, dataset), 0):
            kept = [f for f in self if f.model != model or f.dataset != dataset]
            self.clear()
            super().extend(kept)
            return True
        return False


@dataclass
class ReplicaView:
    """One replica of a model as the front ends show it: its latest load, its state and why,
    and its rate of attempts between two loads at least a second apart."""

    url: str
    state: str = "up"
    reason: str = ""  # why it is out, when it is
    in_flight: int = 0
    limit: int = 0
    attempts: int = 0
    errors: int = 0
    rate: float | None = None  # attempts per second, None before two loads
    _base_at: float | None = field(default=None, repr=False)
    _base: int = field(default=0, repr=False)




@dataclass
class PairState:
    model: str
    dataset: str
    total: int = 0
    shards: int = 1
    completed: int = 0
    failed: int = 0
    status: PairStatus = PairStatus.PENDING
    shard_status: dict[int, PairStatus] = field(default_factory=dict)
    shard_events: dict[int, ev.ShardStatusChanged] = field(default_factory=dict, repr=False)  # the last of each shard
    score: float | None = None
    metric: str = ""
    extra: ev.Metrics = ()  # the other metrics, once scored
    parts: ev.Parts = ()  # a grouped benchmark's parts, once scored
    intervals: ev.Intervals = ()  # its metrics' uncertainty, once scored
    error: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    done_this_run: int = 0  # samples finished since started_at, for throughput and ETA
    sample_retries: int = 0  # whole-sample tries after the first (retry_on_error), in this run
    requests: int = 0  # requests answered in this run: a conversation's each (TurnAnswered), one per unit answered
    conversation: bool = False  # some unit of it made several requests in this run (its requests are shown)
    judge: str = ""  # a judged pair's judge model, once its judging began (PairJudged)
    judged: int = 0  # verdicts that stand (PairJudged)
    to_judge: int = 0  # verdicts its answers need
    judge_failed: int = 0  # answers the judge gave no grade for in this run
    judging: bool = False  # its judge is at work now
    clock: Clock = field(default=time.monotonic, repr=False, compare=False)
    # the deltas of the events that come by the thousand, shared: only this pair's counters moved
    counted: Delta = field(init=False, repr=False, compare=False)
    failed_one: Delta = field(init=False, repr=False, compare=False)  # and a failure was kept

    def __post_init__(self) -> None:
        self.counted = Delta(frozenset({(self.model, self.dataset)}))
        self.failed_one = Delta(self.counted.pairs, failures=1)

    def judged_text(self) -> str:
        """`judged 37/120` (and `, 2 no grade`): its judging as the progress row and lines say it."""
        failed = f", {self.judge_failed} no grade" if self.judge_failed else ""
        return f"judged {self.judged}/{self.to_judge}{failed}"

    def judged_by(self, e: ev.PairJudged) -> Delta:
        """Its verdicts so far (PairJudged, coalesced by the engine: about one a second): its row."""
        self.judge, self.judged, self.to_judge, self.judge_failed, self.judging = e.judge, e.judged, e.answered, e.failed, not e.ended
        return self.counted

    def judging_said(self) -> list[ev.PairJudged]:
        """What rebuilds its judging in a late subscriber's state (RunState.replay)."""
        return [ev.PairJudged(self.model, self.dataset, self.judge, self.judged, self.to_judge, self.judge_failed, not self.judging)] if self.judge else []

    def turn_answered(self) -> Delta:
        """A conversation's request answered before its last (TurnAnswered): one more sent."""
        self.requests += 1
        self.conversation = True
        return self.counted

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.completed - self.failed)

    def throughput(self, now: float | None = None) -> float | None:
        """Samples per second since this pair started in this run; None before the first one, and
        in its first second."""
        if self.started_at is None or not self.done_this_run:
            return None
        end = self.finished_at or (self.clock() if now is None else now)
        span = end - self.started_at
        return self.done_this_run / span if span >= RATE_MIN_SPAN else None

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the current rate, while it runs."""
        rate = self.throughput(now)
        if rate is None or self.status != PairStatus.RUNNING:
            return None
        return self.remaining / rate



class BoardValues(NamedTuple):
    """What the leaderboard shows of the pairs scored so far."""

    scores: dict[Pair, float | None]  # the main metric's, by (model, dataset)
    extra: dict[tuple[str, str, str], float | None]  # the other metrics', by (model, dataset, metric)
    intervals: dict[tuple[str, str, str], Interval]  # every metric's uncertainty, by (model, dataset, metric)


def board_values(pairs: Iterable[PairState], only: Container[Pair] | None = None) -> BoardValues:
    """The leaderboard's values of the scored pairs among `pairs` (`only`: of these (model, dataset))."""
    scored = [((p.model, p.dataset), p) for p in pairs if p.score is not None and (only is None or (p.model, p.dataset) in only)]
    return BoardValues(
        {key: p.score for key, p in scored},
        {(*key, metric): value for key, p in scored for metric, value in p.extra},
        {(*key, metric): interval for key, p in scored for metric, interval in p.intervals},
    )


def combine_shards(shard_status: dict[int, PairStatus], shards: int) -> PairStatus:
    """A pair's status from its shards': running while one runs (or one failed and others are
    still to run), fail once all ended and one failed, done once all are done, else pending."""
    states = [shard_status.get(i, PairStatus.PENDING) for i in range(shards)]
    if PairStatus.RUNNING in states:
        return PairStatus.RUNNING
    if PairStatus.FAIL in states and all(s in (PairStatus.DONE, PairStatus.FAIL) for s in states):
        return PairStatus.FAIL
    if all(s == PairStatus.DONE for s in states):
        return PairStatus.DONE
    if PairStatus.FAIL in states:
        return PairStatus.RUNNING
    return PairStatus.PENDING
