"""How a model's shards and datasets end: final statuses, the final predictions, DatasetInferred.

A shard ends `done` or `fail` against the dataset's failure budget; the last shard of a
dataset merges the checkpoints into the final predictions file before its `done` is written,
so a scorer that sees every shard done finds them. A run that stops leaves every shard that
had not ended `pending`, never `running`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import anyio

from evaltui.engine.disk.predictions import DoneFiles, merge_checkpoints
from evaltui.engine.disk.workdir import StatusWriter, WorkDir
from evaltui.engine.run.runs import DatasetRun, ShardRun, where_it_fits
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import PairStatus
from evaltui.fsutil import discard
from evaltui.plan import DatasetConfig


def failure_budget(ds: DatasetConfig, total: int) -> int:
    """How many samples (units, with epochs) may fail for good and the dataset still count as done.

    A count is itself; a fraction is rounded down with a little slack, so that 29 failures of
    100 are within fail_on_error = 0.29 (whose float product is 28.999999999999996);
    score_on_error lets every one fail."""
    if ds.score_on_error:
        return total
    if isinstance(ds.fail_on_error, int):
        return ds.fail_on_error
    return math.floor(ds.fail_on_error * total + 1e-9)


def stops_early(ds: DatasetConfig) -> bool:
    """Whether a dataset ends as failed as soon as its failures exceed the budget: when the plan
    sets fail_on_error. Without one, it runs to the end, so that its failure says how many
    failed and which fail_on_error would score the rest."""
    return "fail_on_error" in ds.model_fields_set and not ds.score_on_error


def over_budget(ds: DatasetConfig, failed: int, total: int, unsent: int = 0, *, epochs: int = 1, earlier: int = 0) -> str:
    """Why a dataset failed, with the fail_on_error that would score the rest: samples a server
    refuses for good (a prompt too long) fail again on every re-run. `failed`: this run's
    failures; `earlier`: units that failed in an earlier run and were not sent again before it
    stopped (they still stand failed, so they are counted); `unsent`: how many were not sent
    because it stopped early. With epochs the counts are (sample, epoch) units, and say so."""
    what = f"{total} samples" if epochs == 1 else f"{total} units ({total // epochs} samples × {epochs} epochs)"
    standing = failed + earlier
    text = f"{standing} of the dataset's {what} failed (fail_on_error = {ds.fail_on_error!r}"
    if earlier:
        text += f"; {earlier} of them failed in an earlier run and were not sent again before the stop"
    text += ")"
    if unsent:
        return text + f"; stopped early, {unsent} not sent: a re-run sends them first, then tries the failed ones again"
    if standing < total:
        text += f"; fail_on_error = {math.ceil(standing / total * 10_000) / 10_000:g} would score the others"
    return text


PROGRESS_WRITE_INTERVAL = 1.0  # s between progress rewrites of a running shard's status file
# s after its first unit went out that a small dataset's shard says `running`, unless it has ended by then: a
# watcher (evaltui watch, a scorer polling every watch_interval) sees every dataset that lasts
# long enough to be seen going, without a file a dataset for those that come and go at once
RUNNING_AFTER = 0.25


#: s a small dataset that finished waits for others to end with (PairEnding.end_in_batches). Ended one by one
#: as they finished, between requests, every piece of its ending ran cold (the CPU's caches and predictors
#: full of the request path): its merge took 72 µs and its `done` 58 µs there, 22 and 17 µs in a row.
BATCH_WAIT = 0.02


#: s a batch's files are waited for from the worker process (a few ms, a chunk it plans ~0.3 s) before they are
#: written here instead; once it was not in time, this pool's batches are written here.
ELSEWHERE_WAIT = 2.0

#: Where the worker process left a batch's files: for each dataset, its (temporary, path) in the order they go in place.
Moves = list[list[tuple[str, str]]]


class _Ending(NamedTuple):
    status: PairStatus  # the shard's
    final: PairStatus  # the dataset's, when this shard is its last to end (all_final), else FAIL
    error: str
    all_final: bool
    files: DoneFiles | None  # the merge and the `done`, when it ends the dataset done


class PairEnding:
    """Ends one model's shards and datasets; `on_inferred(model, dataset)` wakes the scorer."""

    def __init__(self, model: str, workdir: WorkDir, statuses: StatusWriter, emit: ev.Sink, on_inferred: Callable[[str, str], None]):
        self.model = model
        self.workdir = workdir
        self.statuses = statuses
        self.emit = emit
        self.on_inferred = on_inferred
        self._batching = False  # end_in_batches is running
        self._deferred: list[tuple[DatasetRun, ShardRun]] = []  # small datasets finished, waiting for their batch
        self._due = anyio.Event()  # set: one is waiting
        #: writes a batch's `done` files in the worker process (WorkerProcess.write_files), set by the session when it has one
        self.elsewhere: Callable[[list[DoneFiles]], Awaitable[Moves | None]] | None = None

    def write_status(self, run: DatasetRun, shard: ShardRun, status: str, error: str = "") -> None:
        """The shard's status file, with its counts as they stand."""
        args, fields = self._status_of(run, shard, status, error)
        self.statuses.write(*args, **fields)

    def _status_of(self, run: DatasetRun, shard: ShardRun, status: str, error: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        fields = {"total": shard.total, "completed": shard.completed, "failed": shard.failed, "error": error, "version": run.version}
        return (self.model, run.cfg.abbr, shard.shard, len(run.shards), status), {**fields, "epochs": run.epochs, "samples": run.samples, "urls": run.urls}

    def running_soon(self, run: DatasetRun, live: Callable[[], bool]) -> None:
        """A small dataset's first unit went out (start_shards said nothing): each shard says
        `running` in RUNNING_AFTER, unless by then it has ended, written its progress, or its
        pool stopped (`live()` false: the stop said `pending`, and that must stay)."""
        def say() -> None:
            for shard in run.shards:
                if live() and shard.status is None and shard.outstanding > 0 and shard.last_write <= time.monotonic() - RUNNING_AFTER / 2:
                    shard.last_write = time.monotonic()
                    with contextlib.suppress(OSError):  # a full disk: its `done` (or the stop) says so, where it can be raised
                        self.write_status(run, shard, "running")

        asyncio.get_running_loop().call_later(RUNNING_AFTER, say)

    async def finish_shard(self, run: DatasetRun, shard: ShardRun) -> None:
        """Close a shard whose samples are all finished: its final status, and the final
        predictions when it is the pair's last. Shielded: a Ctrl-C as the checkpoints are being
        merged (a thread that cannot be stopped anyway) takes effect once the shard says how it ended.

        A small dataset of one shard, while `end_in_batches` runs, ends with the others that
        finished within BATCH_WAIT, one after another (end_deferred)."""
        if self._batching and run.small and len(run.shards) == 1:
            shard.close()  # its files let go now: a batch of datasets holds none open
            shard.outstanding = -1  # finished: whatever looks for shards to end (stop_early) passes it by
            self._deferred.append((run, shard))
            self._due.set()
            return
        with anyio.CancelScope(shield=True):
            await self._finish_shard_now(run, shard)

    async def end_in_batches(self) -> None:
        """While the pool runs: small datasets end in batches, every BATCH_WAIT (see BATCH_WAIT).
        Cancelled (the pool's workers are done, or it stops), it ends the last batch before the
        pool says what did not end (its `fail`, its `pending`)."""
        self._batching = True
        try:
            while True:
                await self._due.wait()
                self._due = anyio.Event()
                await anyio.sleep(BATCH_WAIT)
                if self.elsewhere is not None:
                    await self._end_elsewhere(self.elsewhere)
                self.end_deferred()
        finally:
            self._batching = False
            self.end_deferred()

    async def _end_elsewhere(self, elsewhere: Callable[[list[DoneFiles]], Awaitable[Moves | None]]) -> None:
        """The batch's files made by the worker process (as its scoring is: ~85 µs a dataset off
        this loop) under temporary names, put in place here, in order, then said. What it did not
        make (it is gone, late, or a write failed there; this task cancelled as the pool ends) goes
        back to the queue, ahead of any that came since: end_deferred writes it here and raises what
        fails. A late reply's temporaries are removed as it comes (process.py): nothing the worker
        made is put in place once this batch was given up, so it cannot overwrite a pair retried since."""
        deferred, self._deferred = self._deferred, []
        ends = [(run, shard, self._ending_of(run, shard)) for run, shard in deferred if shard.status is None]
        moves: Moves = []
        try:
            batch = [end.files for _, _, end in ends if end.files is not None]
            with anyio.move_on_after(ELSEWHERE_WAIT) as late:
                moves = (await elsewhere(batch) if batch else []) or []
            if late.cancelled_caught:
                self.elsewhere = None  # a worker stopped or busy: this pool's batches are written here
        finally:
            said: list[tuple[DatasetRun, ShardRun, _Ending]] = []
            back: list[tuple[DatasetRun, ShardRun]] = []
            made = iter(moves)
            for run, shard, end in ends:
                mine = next(made, None) if end.files is not None else None
                if back:  # after one that was not put in place: in order, here
                    discard(tmp for tmp, _ in mine or ())
                    back.append((run, shard))
                elif end.files is not None and not self._put_in_place(mine, end.files):
                    back.append((run, shard))
                else:
                    said.append((run, shard, end))
            self._deferred[:0] = back
            self._say_ended(said)

    def _put_in_place(self, made: list[tuple[str, str]] | None, files: DoneFiles) -> bool:
        """A dataset's files the worker made, renamed into place in order (its predictions before
        its `done`); False when there are none, or a rename failed (the rest removed)."""
        try:
            if not made or len(made) < 2:  # (its status not made there: written here)
                raise FileNotFoundError
            for tmp, path in made:
                os.replace(tmp, path)
        except OSError:
            discard(tmp for tmp, _ in made or ())
            return False
        self.statuses.settled(*files.status[:5])
        return True

    def end_deferred(self) -> None:
        """End now the small datasets waiting for their batch, in the order they finished (a
        shard ended meanwhile, by a stopped model's `fail`, is passed by): first the files of
        each, then what is said of each, so that each kind of work runs warm. Should one's files
        fail (a full disk), those before it are said ended and those after it wait for the next call."""
        deferred, self._deferred = self._deferred, []
        ends: list[tuple[DatasetRun, ShardRun, _Ending]] = []
        i = len(deferred)
        try:
            for i, (run, shard) in enumerate(deferred):  # noqa: B007 (i: where it stopped, read in `finally`)
                if shard.status is None:
                    end = self._ending_of(run, shard)
                    if end.files is not None:
                        end.files.write(self.statuses)
                    ends.append((run, shard, end))
            i = len(deferred)
        finally:
            self._deferred[:0] = deferred[i + 1 :]
            self._say_ended(ends)

    def _say_ended(self, ends: list[tuple[DatasetRun, ShardRun, _Ending]]) -> None:
        """_ended for each, whatever one of them raises (its `fail` on a full disk): the others,
        whose files are written, are said all the same; the first error is raised after."""
        failed: Exception | None = None
        for run, shard, end in ends:
            try:
                self._ended(run, shard, end)
            except Exception as e:
                failed = failed or e
        if failed is not None:
            raise failed

    async def _finish_shard_now(self, run: DatasetRun, shard: ShardRun) -> None:
        end = self._ending_of(run, shard)
        if end.files is not None:
            await where_it_fits(run.small, functools.partial(end.files.write, self.statuses))
        self._ended(run, shard, end)

    def _ending_of(self, run: DatasetRun, shard: ShardRun) -> _Ending:
        """How the shard ends, and the files that say so when it ends the dataset `done`."""
        shard.close()
        # fail_on_error is a budget for the whole dataset, so the outcome does not depend on
        # `shards`: a shard fails when the dataset's failures so far exceed it, and the last
        # shard to end therefore fails exactly when the dataset's total does.
        failed = sum(s.failed for s in run.shards)
        ok = failed <= failure_budget(run.cfg, run.total)
        status = PairStatus.DONE if ok else PairStatus.FAIL
        earlier = len(run.failed_before) - run.retried  # failed before, not sent again before a stop
        error = "" if ok else over_budget(run.cfg, failed, run.total, run.unsent, epochs=run.epochs, earlier=earlier)
        shard.outstanding = -1  # finished
        all_final = all(s.outstanding == -1 for s in run.shards)
        final_status = PairStatus.FAIL
        files: DoneFiles | None = None
        if all_final:
            others_done = all(s.status == PairStatus.DONE for s in run.shards if s is not shard)
            final_status = PairStatus.DONE if status == PairStatus.DONE and others_done else PairStatus.FAIL
            if final_status == PairStatus.DONE:
                # Predictions before the last `done`: a scorer that sees all shards done finds
                # them. The two in one go, where the dataset's file work fits (runs.py).
                files = DoneFiles(self._merge(run), *self._status_of(run, shard, status, error))
        return _Ending(status, final_status, error, all_final, files)

    def _ended(self, run: DatasetRun, shard: ShardRun, end: _Ending) -> None:
        """The shard's status file (but for a `done` dataset's, written with its predictions), then said."""
        m, d = self.model, run.cfg.abbr
        if end.final != PairStatus.DONE:
            if end.all_final and end.error:
                self._restate_failed_shards(run, shard, end.error)
            self.write_status(run, shard, end.status, end.error)
        # Only once its status file says so: should the merge or the write fail (a full disk),
        # close_interrupted still finds the shard unfinished and says `pending`, not `running`.
        shard.status = end.status
        self.emit(ev.ShardStatusChanged(m, d, shard.shard, len(run.shards), end.status, shard.total, shard.completed, shard.failed, end.error))
        if end.all_final:
            path = str(self.workdir.predictions_file(m, d)) if end.final == PairStatus.DONE else ""
            self._end_dataset(run, end.final, path, end.error)

    def _restate_failed_shards(self, run: DatasetRun, last: ShardRun, error: str) -> None:
        """The shards that failed before `last` (an early stop ends them as their units come
        back, each with the failures counted by then) say the dataset's final count too."""
        m, d, n = self.model, run.cfg.abbr, len(run.shards)
        for s in run.shards:
            if s is not last and s.status == PairStatus.FAIL:
                self.write_status(run, s, "fail", error)
                self.emit(ev.ShardStatusChanged(m, d, s.shard, n, PairStatus.FAIL, s.total, s.completed, s.failed, error))

    async def stop_early(self, run: DatasetRun) -> None:
        """The dataset's failures exceed its budget (stops_early): none of its samples is handed
        out any more; the ones in flight are awaited, their shards end `fail` as they come back."""
        run.todo, run.stopped_early = iter(()), True
        unsent = 0
        run.again.clear()  # sent back for another try: now not sent (counted below as unsent)
        for s in run.shards:
            if s.outstanding > 0:
                unsent += s.outstanding - s.in_flight
                s.outstanding = s.in_flight
        run.unsent, run.remaining = unsent, sum(max(0, s.outstanding) for s in run.shards)
        for s in run.shards:
            if s.outstanding == 0:
                await self.finish_shard(run, s)

    def end_failed(self, run: DatasetRun, shards: list[ShardRun], error: str) -> None:
        """End the dataset as failed: `fail` (with why) for these shards, DatasetInferred, the
        scorer woken; none of its samples is handed out any more."""
        m, d, n = self.model, run.cfg.abbr, len(run.shards)
        run.started, run.todo, run.remaining = True, iter(()), 0
        run.loaded.set()
        for s in shards:
            s.close()
            s.status, s.outstanding = PairStatus.FAIL, -1
            self.write_status(run, s, "fail", error)
            self.emit(ev.ShardStatusChanged(m, d, s.shard, n, PairStatus.FAIL, s.total, s.completed, s.failed, error))
        self._end_dataset(run, PairStatus.FAIL, "", error)

    def _end_dataset(self, run: DatasetRun, status: PairStatus, path: str, error: str) -> None:
        """DatasetInferred (its predictions, if any, are written) and the scorer woken."""
        m, d = self.model, run.cfg.abbr
        run.todo = iter(())  # lets go of the data file at once
        run.ended = True
        for s in run.shards:  # the bytes kept for its merge, let go: the pool keeps its runs all run (64 KiB a dataset, 10,000 times)
            s.checkpoint.kept = None
        completed = sum(s.completed for s in run.shards)
        failed = sum(s.failed for s in run.shards)
        self.emit(ev.DatasetInferred(m, d, status, completed, failed, path, error))
        self.on_inferred(m, d)

    def _merge(self, run: DatasetRun) -> Callable[[], int]:
        """The merge of the checkpoints into the final predictions file (it reads every line, from
        memory for a checkpoint this run began and kept: a small dataset's)."""
        m, d = self.model, run.cfg.abbr
        paths = run.checkpoints or self.workdir.checkpoint_files(m, d)  # this layout's shards and any earlier layout's
        out = self.workdir.predictions_file(m, d)
        held = {s.checkpoint.path: bytes(s.checkpoint.kept) for s in run.shards if s.checkpoint.kept is not None}
        return functools.partial(merge_checkpoints, paths, run.records, out, epochs=run.epochs, selection=run.selection, held=held)

    def close_interrupted(self, runs: list[DatasetRun]) -> None:
        """On cancellation: close checkpoints and say in the status files that work is left.

        Every shard that has not ended (`done`/`fail`) is said `pending`, so no status file is
        left `running` by a run that stopped. Those finished and waiting for their batch end first,
        as far as the disk lets them (one it does not is said `pending` too)."""
        while self._deferred:
            with contextlib.suppress(OSError):
                self.end_deferred()
        for run in runs:
            if not run.started:
                continue
            for s in run.shards:
                if s.status is None:
                    s.close()
                    # (OSError: the disk that stopped the run; the next run re-plans the shard anyway)
                    with contextlib.suppress(OSError):
                        self.write_status(run, s, "pending", "interrupted; run again to resume")
