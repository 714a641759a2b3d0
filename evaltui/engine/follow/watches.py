"""A followed run's pairs and shards: what their files say, turned into the events that say it.

The follower (follower.py) keeps a `PairWatch` per model×dataset of the work dir and asks each,
at every look, what changed; a pair's `ShardWatch`es read its status files and count the
samples its checkpoints (or, for OpenCompass, its prediction files) hold, through the view
(view.py). The events are the engine's own: a followed run reads as one driven here.
"""

from __future__ import annotations

from evaltui.engine.follow.judged import VerdictCount
from evaltui.engine.follow.view import Outcome, PairSpec, Score, ShardStatus, View, stat_key
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair, PairStatus, SampleError

_FINAL = (PairStatus.DONE, PairStatus.FAIL)


class ShardWatch:
    """One shard: its status file as last read, and its samples as its checkpoint tells them."""

    def __init__(self, view: View, spec: PairSpec, shard: int):
        self.view, self.spec, self.shard = view, spec, shard
        self.key: object = None
        self.touched = False  # its files moved at the last look (a status said again, predictions written)
        self.status: ShardStatus | None = None
        self.was: ShardStatus | None = None  # the status before the last change
        self.tally = view.tally(spec.model, spec.dataset, shard, spec.shards)
        # units are (sample, epoch): a dataset run for several epochs has a line for each
        self.ok: set[tuple[int, int]] = set()
        self.standing: dict[tuple[int, int], SampleError] = {}  # failed and never answered, in the order they failed
        self.counted: dict[tuple[int, int], None] = {}  # the failures said (SampleFailed) in the pair's current run

    @property
    def running(self) -> bool:
        return self.status is not None and self.status.status == PairStatus.RUNNING

    @property
    def final(self) -> bool:
        return self.status is not None and self.status.status in _FINAL

    @property
    def total(self) -> int:
        s = self.status
        if s is not None and s.total is not None:
            return s.total
        return len(self.ok) + len(self.standing) if self.final else 0

    def look_status(self) -> bool:
        """Read the status again if its file changed; True when what it says changed."""
        m, d, n = self.spec
        key = self.view.status_key(m, d, self.shard, n)
        self.touched = key != self.key
        if not self.touched:
            return False
        self.key = key
        status = self.view.read_status(m, d, self.shard, n)
        if status is None and key is not None:
            return False  # torn or garbage: the last good one stands
        if status == self.status:
            return False
        self.was, self.status = self.status, status
        return True

    def take(self, outcomes: list[Outcome], *, say: bool) -> list[ev.Event]:
        """Count samples that ended; with `say`, the events the engine emitted for them."""
        m, d = self.spec.model, self.spec.dataset
        out: list[ev.Event] = []
        for o in outcomes:
            unit = (o.sample, o.epoch)
            if unit in self.ok:
                continue
            if o.turn >= 0:  # a conversation's request answered, the unit not ended: counted as a request
                if say:
                    out.append(ev.TurnAnswered(m, d, self.shard, o.sample, o.turn, o.epoch))
                continue
            if o.error is None:
                self.ok.add(unit)
                self.standing.pop(unit, None)
                if say:
                    out.append(ev.SampleFinished(m, d, self.shard, o.sample, o.epoch))
            else:
                self.standing.pop(unit, None)  # the newest failure of a unit goes last
                self.standing[unit] = o.error
                if say and unit not in self.counted:
                    self.counted[unit] = None
                    out.append(ev.SampleFailed(m, d, self.shard, o.sample, o.error, o.epoch))
        return out

    def changed(self) -> ev.ShardStatusChanged:
        assert self.status is not None
        m, d, n = self.spec
        s = self.status
        return ev.ShardStatusChanged(m, d, self.shard, n, s.status, self.total, len(self.ok), len(self.counted), s.error)


class PairWatch:
    """One model×dataset: what its files say, turned into the events that say it."""

    def __init__(self, view: View, spec: PairSpec):
        self.view, self.spec = view, spec
        self.shards: list[ShardWatch] = []
        self.total = 0
        self.running = False
        self.inferred = False
        self.result_key: object = None
        self.score: Score | None = None
        self.judge = view.judging(spec.model, spec.dataset)
        self.verdicts = VerdictCount(self.judge.verdicts) if self.judge is not None else None
        self.judged_said: ev.PairJudged | None = None  # what the state was last told of its judging

    @property
    def pair(self) -> Pair:
        return self.spec.model, self.spec.dataset

    @property
    def final(self) -> bool:
        return bool(self.shards) and all(s.final for s in self.shards)

    @property
    def planned(self) -> bool:
        """The work dir has a status of this pair (a run took it up), or its result."""
        return any(s.status is not None for s in self.shards) or self.score is not None

    @property
    def done(self) -> bool:
        return self.final and all(s.status is not None and s.status.status == PairStatus.DONE for s in self.shards)

    @property
    def unfinished(self) -> bool:
        """A run took it up and did not see it through (killed, or stopped with Ctrl-C)."""
        return any(s.status is not None and not s.final for s in self.shards)

    def attach(self, *, live: bool = True, joined: bool = False) -> list[ev.Event]:
        """Everything the files say of the pair now, as the events that would have said it.
        `joined`: the follower comes to it under way (DatasetStarted says so); not `live`: the
        run is over, whatever its statuses say (a killed one's still say running): nothing starts."""
        m, d, n = self.spec
        self.shards = [ShardWatch(self.view, self.spec, k) for k in range(n)]
        for s in self.shards:
            s.look_status()
            s.take(s.tally.read(settle=s.final) or [], say=False)
        self.total = sum(s.total for s in self.shards)
        ok = sum(len(s.ok) for s in self.shards)
        out: list[ev.Event] = [ev.DatasetPlanned(m, d, self.total, n, ok)]
        self.running, self.inferred, self.result_key, self.score, self.judged_said = False, False, None, None, None
        if any(s.running for s in self.shards):
            self.running = True
            if live:
                out.append(ev.DatasetStarted(m, d, self.total, max(0, self.total - ok), joined))
        for s in self.shards:
            failures = list(s.standing)
            if s.running and s.status is not None:  # a run in progress: its own failures, not those it is yet to retry
                failures = failures[len(failures) - min(len(failures), s.status.failed or 0) :]
            s.counted = dict.fromkeys(failures)
            out += [ev.SampleFailed(m, d, s.shard, i, s.standing[(i, e)], e) for i, e in failures]
            if s.status is not None:
                out.append(s.changed())
        return out + self._inferred() + self._judged_then_scored()

    def look(self) -> list[ev.Event]:
        """What changed since the last look; the pair planned anew when its files started over."""
        m, d, _ = self.spec
        changed = [s.look_status() for s in self.shards]
        if self._starts_over(changed):
            return self.attach()
        out: list[ev.Event] = []
        if not self.running and any(s.running for s in self.shards):
            self.running, self.inferred = True, False
            ok = sum(len(s.ok) for s in self.shards)
            for s in self.shards:
                s.counted = {}
            self.judged_said = None  # (the state forgets a pair's judging as it starts)
            out.append(ev.DatasetStarted(m, d, self.total, max(0, self.total - ok)))
        for s in self.shards:
            if s.touched or not s.final:  # an ended shard is read once more as it ends: settled, nothing put off
                outcomes = s.tally.read(settle=s.final)
                if outcomes is None:  # replaced or cut: count it all again
                    return self.attach()
                out += s.take(outcomes, say=True)
        out += [s.changed() for s, moved in zip(self.shards, changed, strict=True) if moved and s.status is not None]
        if self.running and not any(s.running for s in self.shards):
            self.running = False
        return out + self._inferred() + self._judged_then_scored()

    def _starts_over(self, changed: list[bool]) -> bool:
        """A new run re-planned the pair (a final status went back, a file was set aside), its
        size changed, or its result went away (a retry): plan it anew."""
        for s, moved in zip(self.shards, changed, strict=True):
            if moved and (s.status is None or (s.was is not None and s.was.status in _FINAL and s.status.status not in _FINAL)):
                return True
        if any(changed) and sum(s.total for s in self.shards) != self.total:
            return True
        return self.score is not None and stat_key(self.view.result_file(*self.pair)) is None

    def _inferred(self) -> list[ev.Event]:
        if self.inferred or not self.final:
            return []
        self.inferred, self.running = True, False
        m, d, _ = self.spec
        statuses = [s.status for s in self.shards if s.status is not None]
        completed = sum(st.completed if st.completed is not None else len(s.ok) for s, st in zip(self.shards, statuses, strict=True))
        failed = sum(st.failed if st.failed is not None else len(s.standing) for s, st in zip(self.shards, statuses, strict=True))
        error = next((st.error for st in statuses if st.error), "")
        status = PairStatus.DONE if self.done else PairStatus.FAIL
        path = str(self.view.predictions_file(m, d)) if self.done else ""
        return [ev.DatasetInferred(m, d, status, completed, failed, path, error, self.total)]

    def _judged_then_scored(self) -> list[ev.Event]:
        """As the run says them: its judging (ended once the pair has a result), then its score."""
        scored = self._scored()
        return self._judged(ended=self.score is not None) + scored

    def _judged(self, *, ended: bool = False) -> list[ev.Event]:
        """PairJudged when the counts moved: the verdicts that stand (verdicts file) of those its
        answered units need (its checkpoints' answers times the verdicts each needs), as the run
        counts them from its files when the pair's judging ends; while it runs, the run's own
        counts only this session's answers, the watcher every answer the files hold."""
        if self.judge is None or self.verdicts is None or (self.judged_said is not None and self.judged_said.ended):
            return []  # not judged, or its judging over: the file no longer grows (a re-run plans the pair anew)
        judged, failed = self.verdicts.counts()
        # (a verdict read after the checkpoints may be of an answer they did not hold yet: it was answered)
        answered = max(self.judge.per_answer * sum(len(s.ok) for s in self.shards), judged + failed)
        now = ev.PairJudged(self.spec.model, self.spec.dataset, self.judge.judge, judged, answered, failed, ended)
        if now == self.judged_said or not (judged or answered or failed):
            return []
        self.judged_said = now
        return [now]

    def judging_over(self) -> list[ev.Event]:
        """The run ended with the pair's judging under way (killed, interrupted): said over."""
        return self._judged(ended=True) if self.judged_said is not None else []

    def _scored(self) -> list[ev.Event]:
        m, d, _ = self.spec
        path = self.view.result_file(m, d)
        key = stat_key(path)
        if key == self.result_key:
            return []
        self.result_key = key
        score = self.view.score(m, d) if key is not None else None
        if score is None or score == self.score:
            return []
        self.score = score
        return [ev.DatasetScored(m, d, score.metric, score.value, score.error, str(path), score.extra, intervals=score.intervals)]
