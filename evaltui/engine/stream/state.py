"""RunState: what both renderers show, folded from the event stream.

`apply` is the only way state changes, so the headless lines, the Textual panes and the tests
all read one truth, and the only place that knows what an event means: it returns a Delta
saying what changed, in the terms a renderer repaints in, so no renderer matches on events
again. It only moves counters (the failures it keeps are bounded), so folding thousands of
events a second costs next to nothing, and it never raises: a consumer that subscribed late,
or an event for a pair it has not heard of, just creates the pair. The clocks are injected so
snapshot tests see fixed ages and rates.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.delta import NOTHING, Delta
from evaltui.engine.stream.events import Pair, PairStatus
from evaltui.engine.stream.pair import RATE_MIN_SPAN, Clock, Failure, KeptFailures, PairState, ReplicaView, combine_shards

_FINAL = (PairStatus.SCORING, PairStatus.SCORED, PairStatus.ERROR)  # inference events no longer move these

# What the events about the whole run change, the same every time
_FLEET = Delta(fleet=True)
_EVERY_PAIR = Delta(every_pair=True, statuses=True)
_RUN_STARTED = Delta(every_pair=True, statuses=True, scores=True, live=True)
_RUN_FINISHED = Delta(every_pair=True, statuses=True, scores=True, live=False)


#: The statuses of a pair a retry re-runs (failed_pairs).
RETRYABLE = frozenset({PairStatus.FAIL, PairStatus.ERROR, PairStatus.SKIPPED})

class RunState:
    def __init__(self, *, clock: Clock = time.monotonic, wall_clock: Clock = time.time, max_failures: int = 1000):
        self.clock = clock
        self.wall_clock = wall_clock
        self.pairs: dict[Pair, PairState] = {}
        self.models: list[str] = []
        self.datasets: list[str] = []
        self._known = set[str]()  # the names in `datasets`: a list's `in` made planning 10,000 datasets quadratic
        self.work_dir = ""
        self.title = ""
        self.began_at: float | None = None  # a followed run's start (RunStarted.began_at)
        self.sim_url = ""
        self.heartbeat_at: float | None = None
        self.failures = KeptFailures(max_failures)
        self.load: dict[str, ev.ModelLoad] = {}
        self.replicas: dict[str, dict[str, ReplicaView]] = {}  # per model (with several urls, or adaptive)
        self.down: dict[str, tuple[ev.ReplicasDown, float]] = {}  # models whose replicas are all out, since when
        self.skipped: list[Pair] = []
        self.notices: list[ev.Notice] = []
        self.finished: ev.RunFinished | None = None
        self.live = False  # between RunStarted (or RetryStarted) and RunFinished
        self.started_at = clock()
        self._ended_at: float | None = None
        self._samples_started_at: float | None = None
        self._samples_done = 0

    def pair(self, model: str, dataset: str) -> PairState:
        key = (model, dataset)
        p = self.pairs.get(key)
        if p is None:
            p = self.pairs[key] = PairState(model, dataset, clock=self.clock)
            if model not in self.models:
                self.models.append(model)
            if dataset not in self._known:
                self._known.add(dataset)
                self.datasets.append(dataset)
        return p

    def apply(self, e: ev.Event) -> Delta:
        """Fold one event in and say what it changed (NOTHING for an event it has no use for)."""
        fold = _FOLDS.get(type(e))
        return NOTHING if fold is None else fold(self, e)

    # -- one fold per event type; each returns what a renderer must repaint
    def _sample_finished(self, e: ev.SampleFinished) -> Delta:
        """The hot path, once per answer: a shared Delta, nothing allocated."""
        p = self.pair(e.model, e.dataset)
        p.completed += 1
        p.requests += 1
        self._sample_done(p)
        return p.counted

    def _sample_failed(self, e: ev.SampleFailed) -> Delta:
        p = self.pair(e.model, e.dataset)
        p.failed += 1
        self._sample_done(p)
        self.failures.append(Failure(e.model, e.dataset, e.sample_index, e.error, e.shard, e.epoch))
        return p.failed_one

    def _sample_retried(self, e: ev.SampleRetried) -> Delta:
        p = self.pair(e.model, e.dataset)
        p.sample_retries += 1
        return p.counted

    def _model_load(self, e: ev.ModelLoad) -> Delta:
        self.load[e.model] = e
        if e.replicas:
            now = self.clock()
            views = self.replicas.setdefault(e.model, {})
            for r in e.replicas:
                v = views.get(r.url) or views.setdefault(r.url, ReplicaView(r.url))
                if v._base_at is None or now - v._base_at >= RATE_MIN_SPAN:
                    if v._base_at is not None:
                        v.rate = max(0, r.attempts - v._base) / (now - v._base_at)
                    v._base_at, v._base = now, r.attempts
                v.state, v.in_flight, v.limit, v.attempts, v.errors = r.state, r.in_flight, r.limit, r.attempts, r.errors
        return NOTHING  # the engine strip shows it, repainted by the clock

    def _replica_state_changed(self, e: ev.ReplicaStateChanged) -> Delta:
        views = self.replicas.setdefault(e.model, {})
        v = views.get(e.url) or views.setdefault(e.url, ReplicaView(e.url))
        v.state = e.state
        if e.state == "ejected":
            v.reason = e.reason
        elif e.state == "up":
            v.reason = ""
            self.down.pop(e.model, None)
        return _FLEET

    def _replicas_down(self, e: ev.ReplicasDown) -> Delta:
        self.down[e.model] = (e, self.clock())
        return _FLEET

    def _heartbeat(self, e: ev.Heartbeat) -> Delta:
        self.heartbeat_at = e.at
        return NOTHING  # as for the load: the strip shows its age

    def _shard_status_changed(self, e: ev.ShardStatusChanged) -> Delta:
        p = self.pair(e.model, e.dataset)
        before = p.status
        p.shards = max(p.shards, e.shards)
        p.shard_status[e.shard] = e.status
        p.shard_events[e.shard] = e
        # a pair of one shard (most are) has that shard's status, as combine_shards would say
        self._set_inference_status(p, e.status if p.shards == 1 and e.shard == 0 else combine_shards(p.shard_status, p.shards))
        if e.error and e.status == PairStatus.FAIL:
            p.error = e.error
        return _changed(p, before)

    def _dataset_started(self, e: ev.DatasetStarted) -> Delta:
        p = self.pair(e.model, e.dataset)
        before = p.status
        p.total, p.started_at, p.finished_at, p.done_this_run, p.sample_retries = e.total, self.clock(), None, 0, 0
        forgot = self._forget_failures(p)  # failed samples are retried: they count again only if they fail again
        p.completed = e.total - e.remaining
        p.status = PairStatus.RUNNING
        return _changed(p, before, failures_reset=forgot)

    def _dataset_inferred(self, e: ev.DatasetInferred) -> Delta:
        p = self.pair(e.model, e.dataset)
        before = p.status
        p.finished_at = self.clock()
        p.completed, p.failed = e.completed, e.failed
        if e.error:
            p.error = e.error
        self._set_inference_status(p, e.status)
        return _changed(p, before, settled=e.status == PairStatus.FAIL)

    def _dataset_scoring(self, e: ev.DatasetScoring) -> Delta:
        p = self.pair(e.model, e.dataset)
        before = p.status
        p.status = PairStatus.SCORING
        return _changed(p, before)

    def _dataset_scored(self, e: ev.DatasetScored) -> Delta:
        p = self.pair(e.model, e.dataset)
        before = p.status
        p.metric, p.score, p.extra, p.parts, p.error, p.intervals = e.metric, e.score, e.extra, e.parts, e.error, e.intervals
        p.status = PairStatus.ERROR if e.error else PairStatus.SCORED
        return _changed(p, before, scores=True, settled=True)

    def _dataset_planned(self, e: ev.DatasetPlanned) -> Delta:
        """Its own row (a new pair's comes in the state's order): not every pair's, which made a
        renderer look at every row at each tick that planned one — all the way through the
        planning of 10,000 datasets."""
        p = self.pair(e.model, e.dataset)
        before, scored = p.status, (p.metric, p.score, p.extra, p.parts, p.intervals)
        forgot = self._forget_failures(p)
        p.total, p.shards, p.completed, p.failed = e.total, e.shards, e.completed, e.failed
        p.status = e.status
        p.shard_status, p.shard_events, p.error = {}, {}, ""
        p.metric, p.score, p.extra, p.parts, p.intervals = e.metric, e.score, e.extra, e.parts, e.intervals
        return _changed(p, before, scores=scored != (p.metric, p.score, p.extra, p.parts, p.intervals), failures_reset=forgot)

    def _retry_started(self, e: ev.RetryStarted) -> Delta:
        if self.finished is not None:  # a new session: rates count from now; elapsed goes on (the session's, not the retry's)
            self._samples_started_at, self._samples_done = None, 0
        self.finished, self._ended_at, self.live = None, None, True
        for model, dataset in e.pairs:
            p = self.pair(model, dataset)
            self._forget_failures(p)
            p.status, p.score, p.extra, p.error, p.intervals = PairStatus.PENDING, None, (), "", ()
            if (model, dataset) in self.skipped:
                self.skipped.remove((model, dataset))
        # scores too: the retried pairs' earlier ones are gone from the leaderboard until they are scored again
        return Delta(every_pair=True, statuses=True, scores=True, failures_reset=True, live=True, retried=frozenset(e.pairs))

    def _scoring_skipped(self, e: ev.ScoringSkipped) -> Delta:
        for model, dataset in e.pairs:
            if (model, dataset) not in self.skipped:
                self.skipped.append((model, dataset))
            p = self.pair(model, dataset)
            if p.status in (PairStatus.DONE, PairStatus.PENDING):  # one still running says so until it ends
                p.status = PairStatus.SKIPPED
        return _EVERY_PAIR

    def _run_started(self, e: ev.RunStarted) -> Delta:
        self.work_dir, self.title, self.began_at = e.work_dir, e.title, e.began_at
        self.models = list(dict.fromkeys([*e.models, *self.models]))
        self.datasets = list(dict.fromkeys([*e.datasets, *self.datasets]))
        self._known = set(self.datasets)
        self.started_at, self._ended_at, self.live = self.clock(), None, True
        if e.began_at is not None:  # followed from its files: it began before we looked
            self.started_at -= max(0.0, self.wall_clock() - e.began_at)
        return _RUN_STARTED

    def _simulator_started(self, e: ev.SimulatorStarted) -> Delta:
        self.sim_url = e.url
        return NOTHING

    def _notice(self, e: ev.Notice) -> Delta:
        self.notices.append(e)
        return Delta(notices=(e,))

    def _run_finished(self, e: ev.RunFinished) -> Delta:
        self.finished, self._ended_at, self.live = e, self.clock(), False
        if self.began_at is not None and e.elapsed:  # followed: it ended when its files say, not now
            self._ended_at = min(self._ended_at, self.started_at + e.elapsed)
        self.down.clear()  # nothing waits any more
        # Cancelled or stopped by an OS error (disk full): nothing runs any more either way.
        for p in self.pairs.values():
            if p.status == PairStatus.RUNNING:  # resumable: stopped when interrupted, else as its status file says
                p.status = PairStatus.STOPPED if e.interrupted else PairStatus.PENDING
            elif e.interrupted and p.status == PairStatus.PENDING and 0 < p.completed + p.failed < p.total:
                p.status = PairStatus.STOPPED  # left pending with work done by a Ctrl-C (its status files say pending): watched later, as stopped
            elif p.status == PairStatus.SCORING:
                p.status = PairStatus.DONE  # inferred; the next run scores it
        return _RUN_FINISHED

    def _set_inference_status(self, p: PairState, status: PairStatus) -> None:
        """What inference says of the pair, unless scoring has taken over. A pair the scorer gave
        up on (a stale heartbeat: the laptop slept) is not scored when its inference ends done:
        it is said skipped, which `r` retries (scores)."""
        if p.status in _FINAL:
            return
        if status == PairStatus.DONE and (p.model, p.dataset) in self.skipped:
            status = PairStatus.SKIPPED
        p.status = status

    def _sample_done(self, p: PairState) -> None:
        p.done_this_run += 1
        self._samples_done += 1
        if self._samples_started_at is None:
            self._samples_started_at = p.started_at if p.started_at is not None else self.clock()

    def _forget_failures(self, p: PairState) -> bool:
        """The pair is planned or started again: its earlier failures no longer stand (nor its
        judging: the engine says it anew when it judges). Whether `failures` lost any."""
        p.failed = 0
        p.judge, p.judged, p.to_judge, p.judge_failed, p.judging = "", 0, 0, 0, False
        return self.failures.forget(p.model, p.dataset)

    def replay(self) -> list[ev.Event]:
        """Events that rebuild this state in a fresh RunState: what a late subscriber is sent first.

        Per pair: DatasetStarted (a running pair: its rate counts from now), DatasetPlanned with
        its counters and status, the last event of each shard; then the failures kept, scores,
        skips, notices, the latest load and beat, and RunFinished if the run has ended. A pair's
        DatasetPlanned counts only the failures the bounded list let go, so that with the
        replayed SampleFailed events the failed count comes out right.
        """
        out: list[ev.Event] = []
        if self.work_dir or self.models:
            out.append(ev.RunStarted(self.work_dir, tuple(self.models), tuple(self.datasets), self.title, self.began_at))
        if self.sim_url:
            out.append(ev.SimulatorStarted(self.sim_url))
        kept: dict[Pair, int] = {}
        for f in self.failures:
            kept[(f.model, f.dataset)] = kept.get((f.model, f.dataset), 0) + 1
        for key, p in self.pairs.items():
            if p.status == PairStatus.RUNNING:
                out.append(ev.DatasetStarted(p.model, p.dataset, p.total, p.total - p.completed))
            score = (p.metric, p.score, p.extra, p.parts, p.intervals) if p.status == PairStatus.SCORED else ("", None, (), (), ())
            out.append(ev.DatasetPlanned(p.model, p.dataset, p.total, p.shards, p.completed, max(0, p.failed - kept.get(key, 0)), p.status, *score))
            out.extend(p.shard_events[k] for k in sorted(p.shard_events))
            out.extend(p.judging_said())
        out.extend(ev.SampleFailed(f.model, f.dataset, f.shard, f.sample_index, f.error, f.epoch) for f in self.failures)
        out.extend(ev.DatasetScored(p.model, p.dataset, p.metric, None, p.error) for p in self.pairs.values() if p.status == PairStatus.ERROR)
        if self.skipped:
            out.append(ev.ScoringSkipped(tuple(self.skipped), "skipped earlier in this run"))
        out.extend(self.notices)
        out.extend(self.load.values())
        for model, views in self.replicas.items():
            out.extend(ev.ReplicaStateChanged(model, v.url, v.state, v.reason) for v in views.values() if v.state != "up")
        out.extend(down for down, _ in self.down.values())
        if self.heartbeat_at is not None:
            out.append(ev.Heartbeat(self.heartbeat_at))
        if self.finished is not None:
            out.append(self.finished)
        return out

    # -- queries for renderers
    def newest_failures(self, n: int) -> list[Failure]:
        """The last `n` failures kept (what `Delta.failures` counted); fewer when the bounded
        list let go of some."""
        kept = len(self.failures)
        return list(itertools.islice(self.failures, max(0, kept - n), kept))

    def failed_pairs(self) -> list[Pair]:
        """The pairs a retry-all would re-run: inference failed, or scoring did, or the scorer
        gave up on them (a stale heartbeat: the laptop slept) — a retry scores what is done."""
        return [key for key, p in self.pairs.items() if p.status in RETRYABLE]

    def stopped_pairs(self) -> list[Pair]:
        """The pairs an interrupted run left under way: running the plan again resumes them."""
        return [key for key, p in self.pairs.items() if p.status == PairStatus.STOPPED]

    def totals(self) -> tuple[int, int, int]:
        """(completed, failed, total) over every pair."""
        c = f = n = 0
        for p in self.pairs.values():
            c += p.completed
            f += p.failed
            n += p.total
        return c, f, n

    def cost(self) -> float | None:
        """What the priced models' tokens cost so far in this run; None when no model has a price."""
        costs = [load.cost for load in self.load.values() if load.cost is not None]
        return sum(costs) if costs else None

    def retries(self) -> int:
        """Request attempts beyond the first, over every model, so far."""
        return sum(load.retries for load in self.load.values())

    def down_for(self, model: str) -> float | None:
        """Seconds every replica of `model` has been out (its requests waiting); None if one is up."""
        down = self.down.get(model)
        return None if down is None else max(0.0, self.clock() - down[1])

    def heartbeat_age(self) -> float | None:
        """Seconds since the last beat of infer_heartbeat; None before the first."""
        return None if self.heartbeat_at is None else max(0.0, self.wall_clock() - self.heartbeat_at)

    def elapsed(self) -> float:
        """Seconds since the run started; it stops with the run and goes on with a retry (the
        strip's time is the session's: a retry after the run ended counts on from its start)."""
        end = self._ended_at if self._ended_at is not None else self.clock()
        return max(0.0, end - self.started_at)

    def throughput(self) -> float | None:
        """Samples per second over every pair since the first sample of the run (None in its
        first second)."""
        if self._samples_started_at is None or not self._samples_done:
            return None
        end = self._ended_at if self._ended_at is not None else self.clock()
        span = end - self._samples_started_at
        return self._samples_done / span if span >= RATE_MIN_SPAN else None


_FOLDS: dict[type, Callable[[RunState, Any], Delta]] = {
    ev.SampleFinished: RunState._sample_finished,
    ev.SampleFailed: RunState._sample_failed,
    ev.SampleRetried: RunState._sample_retried,
    ev.TurnAnswered: lambda s, e: s.pair(e.model, e.dataset).turn_answered(),
    ev.ModelLoad: RunState._model_load,
    ev.ReplicaStateChanged: RunState._replica_state_changed,
    ev.ReplicasDown: RunState._replicas_down,
    ev.Heartbeat: RunState._heartbeat,
    ev.ShardStatusChanged: RunState._shard_status_changed,
    ev.DatasetStarted: RunState._dataset_started,
    ev.DatasetInferred: RunState._dataset_inferred,
    ev.DatasetScoring: RunState._dataset_scoring,
    ev.DatasetScored: RunState._dataset_scored,
    ev.DatasetPlanned: RunState._dataset_planned,
    ev.PairJudged: lambda s, e: s.pair(e.model, e.dataset).judged_by(e),
    ev.RetryStarted: RunState._retry_started,
    ev.ScoringSkipped: RunState._scoring_skipped,
    ev.RunStarted: RunState._run_started,
    ev.SimulatorStarted: RunState._simulator_started,
    ev.Notice: RunState._notice,
    ev.RunFinished: RunState._run_finished,
}


def _changed(p: PairState, before: PairStatus, *, scores: bool = False, failures_reset: bool = False, settled: bool = False) -> Delta:
    """The delta of an event about one pair whose status was `before` (the shared one when
    only its counters moved)."""
    statuses = p.status != before
    if not (statuses or scores or failures_reset or settled):
        return p.counted
    pair = p.counted.pairs
    return Delta(pair, statuses=statuses, scores=scores, failures_reset=failures_reset, settled=pair if settled else frozenset())
