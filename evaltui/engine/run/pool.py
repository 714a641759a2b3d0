"""One model's worker pool: every dataset of the plan through one pool of `max_workers` slots.

Layering, after Inspect AI's eval loop, each layer removing one dimension:
  Runner (models) → WorkerPool (datasets of one model) → DatasetRun (shards) → one sample.

The pool is `max_workers` worker coroutines pulling the next sample in plan order, which is the
OpenCompass semaphore without one task per sample: memory follows concurrency, not dataset
size. The next datasets are loaded as soon as the running ones have fewer than 1.5 × max_workers
samples left (up to 2 ×), so their first requests go out while the previous dataset's last ones
are in flight and the pool never drains at a dataset boundary.

What the pool is given comes from resume planning (resume.py); how a shard and its dataset end
(final statuses, the merged predictions) is ending.py's.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from evaltui.backends import backend_class
from evaltui.datasets import DatasetError, open_records
from evaltui.engine.disk.checkpoint import turn_line
from evaltui.engine.disk.units import unit_key
from evaltui.engine.disk.workdir import StatusWriter, WorkDir
from evaltui.engine.run.ending import PROGRESS_WRITE_INTERVAL, PairEnding, failure_budget, stops_early
from evaltui.engine.run.runs import DatasetRun, ShardRun, is_small, start_shards, where_it_fits
from evaltui.engine.run.todo import first_pass_skip, todo
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import PairStatus, SampleError
from evaltui.engine.unit.answer import AGAIN, Answerer
from evaltui.engine.unit.conversing import TurnLog
from evaltui.engine.unit.tries import Again
from evaltui.failure import ErrorKind
from evaltui.plan import ModelConfig, Plan
from evaltui.plan.price import CostMeter

# Samples in a row that found no server (connection refused, unknown host, or every request refused as unauthorised / not
# found) with nothing answered yet, after which a model stops: a wrong URL or a server not up would otherwise grind through every sample's retries.
NO_SERVER_AFTER = 8
_NO_SERVER_STATUSES = (401, 403, 404, 405)
LOAD_REPORT_INTERVAL = 1.0  # s between ModelLoad events of a running model


class WorkerPool:
    """One model's datasets through its `max_workers` slots, in plan order (see the module's docstring)."""

    def __init__(
        self,
        plan: Plan,
        model: ModelConfig,
        answerer: Answerer,
        workdir: WorkDir,
        statuses: StatusWriter,
        emit: ev.Sink,
        on_inferred: Callable[[str, str], None] | None = None,
        cost: CostMeter | None = None,
        on_answered: Callable[[str, str, dict[str, Any]], None] | None = None,  # a unit's answer checkpointed (a judged pair's feed)
    ):
        self.plan = plan
        self.model = model
        self.cost = cost or CostMeter(plan)  # the session's, shared by its pools (cost_limit is the run's)
        self._priced = self.cost.priced(model.abbr)
        self.answerer = answerer  # where its units are answered: here (answer.py), or on Ray (ray/model.py)
        self.statuses = statuses
        self.emit = emit
        self._on_answered = on_answered or (lambda model, dataset, entry: None)
        self.ending = PairEnding(model.abbr, workdir, statuses, emit, on_inferred or (lambda model, dataset: None))
        self.runs: list[DatasetRun] = []  # in the order they run; a retry appends the pair again
        self._cursor = 0  # index into runs of the dataset whose samples are being handed out
        self._next_to_start = 0
        self._tg: TaskGroup | None = None  # while run() runs: where datasets are loaded
        self._workers: TaskGroup | None = None  # while run() runs: the worker pool
        self._live_workers = 0
        self._early_start_below = 2 * model.max_workers
        self.samples = 0  # (sample, epoch) units answered or failed for good in this run
        self._server_seen = False  # a reply (or an error only one sample has) came back in this run
        self._no_server = 0  # samples that found no server, while none has been seen
        self._stopped = ""  # why the model stopped before its samples were done
        self._backlog: deque[DatasetRun] = deque()  # datasets with units sent back for another try, in that order
        self._out = 0  # units being answered now (one may be sent back)
        self._returned = anyio.Event()  # a unit came back (answered, or sent back)

    def add_runs(self, runs: list[DatasetRun], *, first: bool = False) -> None:
        """Queue planned datasets; while the pool runs they join it (a retry of a live run).

        `first` (a retry the user asked for): they go ahead of the dataset being handed out and
        start loading now, so its failed samples are sent next, not after every dataset still
        queued — which on a long plan could be hours. The dataset they overtake goes on after.
        """
        if first and self._workers is not None and self._tg is not None and self._cursor < len(self.runs):
            at = self._cursor
            self.runs[at:at] = runs
            self._next_to_start += len(runs)  # runs[:_next_to_start] are the started ones
            for run in runs:
                run.started = True
            self._tg.start_soon(self._load_in_turn, runs)
        else:
            self.runs.extend(runs)
        if self._workers is not None:
            self._maybe_start_more()
            self._add_workers()

    def has_work(self) -> bool:
        """Whether some queued dataset has not been started: run() has more to do."""
        return self._next_to_start < len(self.runs)

    def busy(self, dataset: str) -> bool:
        """Whether this dataset is queued or being inferred now."""
        return any(r.cfg.abbr == dataset and not r.ended for r in self.runs)

    # ------------------------------------------------------------------ running
    async def run(self) -> None:
        """Run what is queued; datasets added meanwhile (add_runs) join the pool. Returns when
        the queue is empty; the caller runs it again if a dataset was added after that."""
        if not self.has_work():
            return
        # Work added later (a retry) finds out again whether the server is there: it may be down now.
        self._stopped, self._no_server, self._server_seen = "", 0, False
        try:
            async with anyio.create_task_group() as outer:
                self._tg = outer
                outer.start_soon(self._poll)
                outer.start_soon(self.ending.end_in_batches)  # (its last batch ended as `outer` is cancelled below)
                await outer.start(self.answerer.serve)
                outer.start_soon(self._report_load)
                async with anyio.create_task_group() as workers:
                    self._workers = workers
                    self._maybe_start_more()
                    self._add_workers()
                self._workers = None
                outer.cancel_scope.cancel()  # the poll's safety net is not needed any more
            if self._stopped:
                self._fail_unfinished(self._stopped)
        finally:
            self._workers = self._tg = None
            with anyio.CancelScope(shield=True):
                self.ending.close_interrupted(self.runs)
                self._emit_load()

    def _add_workers(self) -> None:
        """max_workers slots, but never more workers than samples left to run (and at least one,
        which also walks datasets with nothing left through their ending)."""
        assert self._workers is not None
        left = sum(r.remaining for r in self.runs[self._cursor :])
        while self._live_workers < max(1, min(self.model.max_workers, left)):
            self._live_workers += 1
            self._workers.start_soon(self._worker)

    async def _report_load(self) -> None:
        """ModelLoad about once a second: counters read, never an event per request."""
        while True:
            self._emit_load()
            await anyio.sleep(LOAD_REPORT_INTERVAL)

    def _emit_load(self) -> None:
        load = self.answerer.load(self.samples)
        self.emit(load._replace(cost=self.cost.cost(self.model.abbr), usage=self.cost.usage(self.model.abbr)) if self._priced else load)

    def _stop_for_cost(self) -> None:
        """cost_limit reached: this model sends nothing more (what is out finishes); its
        unfinished shards end `fail` saying why, and a re-run continues them."""
        self._stopped = self.cost.why()
        if not self.cost.said:
            self.cost.said = True
            self.emit(ev.Notice(f"cost_limit reached: {self.cost.why()[len('stopped: '):]}", "warning"))

    async def _poll(self) -> None:
        """The scheduling check every poll_interval, a safety net beside the per-sample checks."""
        while True:
            await anyio.sleep(self.plan.run.poll_interval)
            self._maybe_start_more()

    def _maybe_start_more(self) -> None:
        """Once the started ones (from the cursor: those before it have only their requests in flight; each counts its planned units before it is
        loaded) have ≤ 1.5 × max_workers units to hand out, start queued ones in turn until they have 2 × (counted no further: a sum over all grew with
        10,000 datasets; all started at once held all their files open). In bursts, loaded one after another: warm (10,000 × 3: −0.6 s of CPU)."""
        first = self._next_to_start
        left = 0
        for i in range(self._cursor, first):
            left += self.runs[i].remaining
            if left > 3 * self.model.max_workers // 2:
                return
        while self._next_to_start < len(self.runs) and (left < self._early_start_below or self._next_to_start == 0):
            run = self.runs[self._next_to_start]
            run.started, left = True, left + run.remaining
            self._next_to_start += 1
        if self._next_to_start > first:
            assert self._tg is not None
            self._tg.start_soon(self._load_in_turn, self.runs[first : self._next_to_start])

    async def _load_in_turn(self, runs: list[DatasetRun]) -> None:
        """Datasets loaded one after another by one task (a task each cost ~18 µs of the loop: 10,000 in a plan of small
        datasets), a large one in a task of its own: its file work, in a thread, holds up none of those after it."""
        for run in runs:
            if is_small(run, self.plan.dataset_path(run.cfg)):
                await self._load(run, True)
            else:
                assert self._tg is not None
                self._tg.start_soon(self._load, run, False)

    async def _load(self, run: DatasetRun, small: bool) -> None:
        m, d, run.small = self.model.abbr, run.cfg.abbr, small
        try:
            # The file is opened (and a .json array parsed) where it fits; lines are read as needed.
            records = await where_it_fits(run.small, partial(open_records, self.plan, run.cfg, first_pass_skip(run)))
        except (DatasetError, OSError) as e:
            self.ending.end_failed(run, run.shards, str(e))  # nothing of it will run: the next dataset may start
            self._maybe_start_more()
            return
        for s in run.shards:
            s.outstanding = s.total - s.completed  # `completed` counted the kept samples when planned
        run.remaining = sum(s.outstanding for s in run.shards)
        if run.remaining:
            await where_it_fits(run.small, partial(start_shards, run, asyncio.get_running_loop().call_soon, partial(self.ending.write_status, run)))
        run.todo = todo(run, records, partial(open_records, self.plan, run.cfg))
        self.emit(ev.DatasetStarted(m, d, run.total, run.remaining))
        for s in run.shards:
            if s.outstanding:
                s.last_write = time.monotonic()
                self.emit(ev.ShardStatusChanged(m, d, s.shard, len(run.shards), PairStatus.RUNNING, s.total, s.completed, 0))
            else:
                await self.ending.finish_shard(run, s)
        run.loaded.set()  # (no scheduling check: a dataset loaded only adds to the units ahead)

    async def _worker(self) -> None:
        try:
            await self._take_samples()
        finally:
            self._live_workers -= 1

    async def _take_samples(self) -> None:
        while not self._stopped:
            if self.cost.reached():
                self._stop_for_cost()
                return
            again = self._again_now()
            if again is not None:
                await self._sample(*again)
                continue
            if self._cursor >= len(self.runs):
                if not self._backlog and not self._out:
                    return  # nothing left to send, nor to come back
                await self._await_again()
                continue
            run = self.runs[self._cursor]
            if not run.started:
                self._maybe_start_more()
            if run.todo is None:
                await run.loaded.wait()
                continue
            job = next(run.todo, None)
            if job is None:
                run.exhausted = True  # its units sent back for another try go now (the back of its queue)
                if self.runs[self._cursor] is run:
                    self._cursor += 1
                    self._maybe_start_more()  # its units in flight no longer count as ahead
                continue
            if run.small and not run.sending:  # its first unit: `running` soon, unless it has ended by then (start_shards)
                run.sending = True
                self.ending.running_soon(run, lambda: self._workers is not None)
            await self._sample(run, *job)

    def _again_now(self) -> tuple[DatasetRun, ShardRun, int, int, dict[str, Any] | str, Again] | None:
        """A unit sent back for another try (retry_on_error) whose turn has come: its dataset's other units all handed out, and its backoff waited."""
        while self._backlog:
            run = self._backlog[0]
            if not run.again:
                self._backlog.popleft()
                continue
            (shard, index, epoch, record, again), not_before = run.again[0]
            if not run.exhausted or not_before > time.monotonic():
                return None
            run.again.popleft()
            return run, shard, index, epoch, record, again
        return None

    async def _await_again(self) -> None:
        """Nothing to send now: wait for a unit to come back (or to end), or the first one sent back to be due."""
        due = math.inf
        if self._backlog and self._backlog[0].again:
            due = max(0.0, self._backlog[0].again[0][1] - time.monotonic())
        if self._returned.is_set():
            self._returned = anyio.Event()
        with anyio.move_on_after(due):
            await self._returned.wait()

    async def _sample(
        self, run: DatasetRun, shard: ShardRun, index: int, epoch: int, record: dict[str, Any] | str, again: Again | None = None
    ) -> None:
        cfg = run.cfg
        shard.in_flight += 1  # until it is counted below: an early stop (stop_early) waits for it
        turns = None
        if run.turns is not None:  # a conversation: its requests answered before, each answered now checkpointed
            turns = TurnLog(run.turns.pop(unit_key(index, epoch, run.epochs), ()), partial(self._turn_answered, run, shard, index, epoch))
        self._out += 1
        try:
            # a priced model's units are traced whatever sample_log says: their usage is what they cost
            traced = shard.log is not None or self._priced
            entry, line = await self.answerer.answer(cfg, shard.shard, index, epoch, record, run.tokens, traced, turns, again, True)
        finally:
            self._out -= 1
            self._returned.set()
        if AGAIN in entry:  # to the back of its dataset's queue, for its next try
            sent_back: Again = entry[AGAIN]
            run.again.append(((shard, index, epoch, record, sent_back), time.monotonic() + sent_back.wait))
            if not run.stopped_early and run not in self._backlog:
                self._backlog.append(run)
            shard.in_flight -= 1
            return
        if line is not None:
            self.cost.add(self.model.abbr, cfg.abbr, line.get("usage"))
            if shard.log is not None:
                shard.log.append(line)  # before the checkpoint's line (see ShardRun.open)
        self.samples += 1
        shard.checkpoint.append(entry)
        # On disk before this worker sends its next request. Shielded: the line goes out at the
        # end of this loop turn even if the pool is cancelled now (a model stopped), and a line on
        # disk must be counted in the status files with it.
        with anyio.CancelScope(shield=True):
            await shard.checkpoint.written()
        m, d = self.model.abbr, cfg.abbr
        if "error" in entry:
            shard.failed += 1
            self.emit(ev.SampleFailed(m, d, shard.shard, index, SampleError.from_dict(entry["error"]), epoch))
            self._check_server(entry["error"])
        else:
            shard.completed += 1
            self._server_seen = True
            self.emit(ev.SampleFinished(m, d, shard.shard, index, epoch))
            self._on_answered(m, d, entry)
        shard.outstanding -= 1
        shard.in_flight -= 1
        run.remaining -= 1
        run.retried += unit_key(index, epoch, run.epochs) in run.failed_before
        if "error" in entry and not run.stopped_early and stops_early(cfg) and sum(s.failed for s in run.shards) > failure_budget(cfg, run.total):
            await self.ending.stop_early(run)
        if shard.outstanding == 0:
            await self.ending.finish_shard(run, shard)
        else:
            now = time.monotonic()
            if now - shard.last_write >= PROGRESS_WRITE_INTERVAL:
                shard.last_write = now
                self.ending.write_status(run, shard, "running")
        if not run.exhausted and run.remaining < self._early_start_below:
            self._maybe_start_more()  # (one handed out in full left the count when the cursor moved on)

    async def _turn_answered(self, run: DatasetRun, shard: ShardRun, index: int, epoch: int, number: int, turn: dict[str, Any]) -> None:
        """A conversation's request answered (not its last): its turn line on disk before the
        next request goes (shielded, as the unit's own line), then said."""
        shard.checkpoint.append(turn_line(index, epoch, number, turn))
        with anyio.CancelScope(shield=True):
            await shard.checkpoint.written()
        self.emit(ev.TurnAnswered(self.model.abbr, run.cfg.abbr, shard.shard, index, number, epoch))

    def _check_server(self, error: dict[str, Any]) -> None:
        """Stop the model when its first samples all found no server (see NO_SERVER_AFTER), or
        when every replica has been down for down_timeout: the samples out then fail with that
        reason, and no worker takes another (a re-run resumes them)."""
        if self._stopped:
            return
        if error.get("type") == ErrorKind.DOWN:
            self._stopped = f"stopped: {error.get('message')}"
            self.emit(ev.Notice(f"{self.model.abbr}: {error.get('message')}; stopping this model — run again once a server is back", "error"))
            return
        if self._server_seen:
            return
        if error.get("type") != ErrorKind.CONNECT and error.get("status") not in _NO_SERVER_STATUSES:
            self._server_seen = True  # an error of this sample's own (a prompt too long): the server is there
            return
        self._no_server += 1
        if self._no_server >= NO_SERVER_AFTER and self.answerer.silent():  # every replica failed, none answered
            code = f" {error['status']}" if error.get("status") is not None else ""
            why = f"{error.get('type')}{code}: {error.get('message')}"
            self._stopped = f"stopped: the model's server did not answer ({why})"
            hint = f" (type {self.model.type} wants {backend_class(self.model).url_form})" if error.get("status") == 404 else ""
            self.emit(ev.Notice(
                f"{self.model.abbr}: the first {self._no_server} samples all failed and none was answered; stopping this model — "
                f"check its url ({', '.join(self.answerer.urls)}){hint} and that its server is up, then run again", "error"))
            if self._workers is not None:
                self._workers.cancel_scope.cancel()

    def _fail_unfinished(self, error: str) -> None:
        """Say `fail` (with why) for every shard the stopped model did not finish; a re-run resumes them."""
        for run in self.runs:
            unfinished = [s for s in run.shards if s.status is None]
            if unfinished:
                self.ending.end_failed(run, unfinished, error)
            else:  # ended already; one never started must not be waited for
                run.started, run.todo, run.remaining = True, iter(()), 0
                run.loaded.set()
        self._next_to_start = self._cursor = len(self.runs)  # all of it is over: nothing more to run
