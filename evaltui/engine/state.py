"""RunState: what both renderers show, folded from the event stream.

`apply` is the only way state changes, so the headless lines, the Textual panes and the tests
all read one truth. It only moves counters (no per-sample objects kept), so folding thousands of
events a second costs next to nothing.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from evaltui.engine import events as ev


Status = ev.PairStatus


@dataclass
class PairState:
    model: str
    dataset: str
    total: int = 0
    shards: int = 1
    completed: int = 0
    failed: int = 0
    status: ev.PairStatus = ev.PairStatus.PENDING
    clock: Callable[[], float] = time.monotonic
    shard_status: dict[int, str] = field(default_factory=dict)
    score: float | None = None
    metric: str = ""
    error: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    done_this_run: int = 0  # samples finished since started_at, for throughput and ETA

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.completed - self.failed)

    def throughput(self, now: float | None = None) -> float | None:
        if self.started_at is None or not self.done_this_run:
            return None
        end = self.finished_at or (self.clock() if now is None else now)
        span = end - self.started_at
        return self.done_this_run / span if span > 0 else None

    def eta(self, now: float | None = None) -> float | None:
        rate = self.throughput(now)
        if rate is None or self.status != "running":
            return None
        return self.remaining / rate


@dataclass
class Failure:
    model: str
    dataset: str
    sample_index: int
    error: ev.SampleError


class RunState:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time, max_failures: int = 1000):
        self.clock = clock
        self.wall_clock = wall_clock
        self.load: dict[str, ev.ModelLoad] = {}
        self.pairs: dict[tuple[str, str], PairState] = {}
        self.models: list[str] = []
        self.datasets: list[str] = []
        self.work_dir = ""
        self.title = ""
        self.sim_url = ""
        self.heartbeat_at: float | None = None
        self.failures: deque[Failure] = deque(maxlen=max_failures)
        self.failure_count = 0
        self.skipped: list[tuple[str, str]] = []
        self.notices: list[ev.Notice] = []
        self.finished: ev.RunFinished | None = None
        self.started_at = clock()

    def pair(self, model: str, dataset: str) -> PairState:
        key = (model, dataset)
        p = self.pairs.get(key)
        if p is None:
            p = self.pairs[key] = PairState(model, dataset)
        return p

    def apply(self, e: ev.Event) -> None:
        t = type(e)
        if t is ev.SampleFinished:
            p = self.pair(e.model, e.dataset)
            p.completed += 1
            p.done_this_run += 1
        elif t is ev.SampleFailed:
            p = self.pair(e.model, e.dataset)
            p.failed += 1
            p.done_this_run += 1
            self.failure_count += 1
            self.failures.append(Failure(e.model, e.dataset, e.sample_index, e.error))
        elif t is ev.ShardStatusChanged:
            p = self.pair(e.model, e.dataset)
            p.shard_status[e.shard] = e.status
            if p.status not in ("scored", "error"):
                p.status = Status(_combine(p.shard_status, p.shards))
            if e.error and e.status == "fail":
                p.error = e.error
        elif t is ev.DatasetStarted:
            p = self.pair(e.model, e.dataset)
            p.total = e.total
            p.started_at = self.clock()
            self._forget_failures(e.model, e.dataset)
            p.done_this_run = 0
            p.failed = 0  # failed samples are retried: they count again only if they fail again
            p.completed = e.total - e.remaining
            p.status = Status.RUNNING
        elif t is ev.DatasetInferred:
            p = self.pair(e.model, e.dataset)
            p.finished_at = self.clock()
            p.completed, p.failed = e.completed, e.failed
            if p.status not in ("scored", "error"):
                p.status = Status(e.status)
        elif t is ev.DatasetScored:
            p = self.pair(e.model, e.dataset)
            p.metric = e.metric
            p.score = e.score
            p.error = e.error
            p.status = Status.ERROR if e.error else Status.SCORED
        elif t is ev.DatasetScoring:
            self.pair(e.model, e.dataset).status = Status.SCORING
        elif t is ev.ModelLoad:
            self.load[e.model] = e
        elif t is ev.RetryStarted:
            for model, dataset in e.pairs:
                self._forget_failures(model, dataset)
                self.pair(model, dataset).failed = 0
        elif t is ev.DatasetPlanned:
            p = self.pair(e.model, e.dataset)
            p.total, p.shards, p.completed, p.failed = e.total, e.shards, e.completed, e.failed
            p.status = Status(e.status)
            p.shard_status = {}
            p.error = ""
            if e.model not in self.models:
                self.models.append(e.model)
            if e.dataset not in self.datasets:
                self.datasets.append(e.dataset)
        elif t is ev.Heartbeat:
            self.heartbeat_at = e.at
        elif t is ev.WatchSkipped:
            for model, dataset in e.pairs:
                self.skipped.append((model, dataset))
                p = self.pair(model, dataset)
                if p.status not in ("scored", "error", "fail"):
                    p.status = Status.SKIPPED
        elif t is ev.RunStarted:
            self.work_dir, self.title = e.work_dir, e.title
            self.models = list(e.models)
            self.datasets = list(e.datasets)
        elif t is ev.SimulatorStarted:
            self.sim_url = e.url
        elif t is ev.Notice:
            self.notices.append(e)
        elif t is ev.RunFinished:
            self.finished = e
            if e.interrupted:
                for p in self.pairs.values():
                    if p.status == "running":
                        p.status = Status.PENDING  # as its status file says: interrupted, resumable

    def _forget_failures(self, model: str, dataset: str) -> None:
        kept = [f for f in self.failures if (f.model, f.dataset) != (model, dataset)]
        self.failures.clear()
        self.failures.extend(kept)

    def failures_of(self, model: str, dataset: str) -> list[Failure]:
        return [f for f in self.failures if (f.model, f.dataset) == (model, dataset)]

    def failed_pairs(self) -> list[tuple[str, str]]:
        return [k for k, p in self.pairs.items() if p.status in (Status.FAIL, Status.ERROR)]

    def retries(self) -> int:
        return sum(m.retries for m in self.load.values())

    def heartbeat_age(self) -> float | None:
        return None if self.heartbeat_at is None else self.wall_clock() - self.heartbeat_at

    def elapsed(self) -> float:
        return self.clock() - self.started_at

    def throughput(self) -> float | None:
        rates = [r for p in self.pairs.values() if p.status == Status.RUNNING and (r := p.throughput()) is not None]
        return sum(rates) if rates else None

    # -- summaries for renderers
    def totals(self) -> tuple[int, int, int]:
        """(completed, failed, total) over every pair."""
        c = f = n = 0
        for p in self.pairs.values():
            c += p.completed
            f += p.failed
            n += p.total
        return c, f, n


def _combine(shard_status: dict[int, str], shards: int) -> str:
    states = [shard_status.get(i, "pending") for i in range(shards)]
    if "running" in states:
        return "running"
    if "fail" in states and all(s in ("done", "fail") for s in states):
        return "fail"
    if all(s == "done" for s in states):
        return "done"
    if "fail" in states:
        return "running"
    return "pending"
