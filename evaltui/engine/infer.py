"""One model's inference task: every dataset of the plan through one pool of `max_workers` slots.

Layering, after Inspect AI's eval loop, each layer removing one dimension:
  Runner (models) → ModelInference (datasets of one model) → DatasetRun (shards) → one sample.

The pool is `max_workers` worker coroutines pulling the next sample in plan order, which is the
OpenCompass semaphore without one task per sample: memory follows concurrency, not dataset
size. The next dataset is loaded as soon as the running ones have fewer than 2 × max_workers
samples left, so its first requests go out while the previous dataset's last ones are in
flight and the pool never drains at a dataset boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import anyio
from anyio.abc import TaskGroup

from evaltui.backends import Backend, BackendError
from evaltui.datasets import DatasetError, Sample, file_fingerprint, open_records, render_sample
from evaltui.engine import events as ev
from evaltui.engine.events import PairStatus, SampleError
from evaltui.engine.redact import model_secrets, redact
from evaltui.engine.versions import evaluator_version, pair_version
from evaltui.engine.checkpoint import Checkpoint, checkpoint_version, merge_checkpoints, predictions_to_checkpoint, scan_checkpoint
from evaltui.engine.workdir import StatusWriter, WorkDir
from evaltui.fsutil import read_json
from evaltui.plan import DatasetConfig, ModelConfig, Plan

# Samples in a row that found no server (connection refused, unknown host, or every request
# refused as unauthorised / not found) with nothing answered yet, after which a model stops: a
# wrong URL or a server that is not up would otherwise grind through every sample's retries.
NO_SERVER_AFTER = 8
_NO_SERVER_STATUSES = (401, 403, 404, 405)
PROGRESS_WRITE_INTERVAL = 1.0  # s between progress rewrites of a running shard's status file
LOAD_REPORT_INTERVAL = 1.0  # s between ModelLoad events of a running model


def failure_budget(ds: DatasetConfig, total: int) -> int:
    """How many samples may fail for good and the dataset still count as done.

    An integer, rounded down with a little slack, so that 29 failures of 100 are within
    fail_on_error = 0.29 (whose float product is 28.999999999999996)."""
    return math.floor(ds.fail_on_error * total + 1e-9)


def _over_budget(ds: DatasetConfig, failed: int, total: int) -> str:
    """Why a dataset failed, with the fail_on_error that would score the rest: samples a server
    refuses for good (a prompt too long) fail again on every re-run."""
    text = f"{failed} of the dataset's {total} samples failed (fail_on_error = {ds.fail_on_error:g})"
    if failed < total:
        text += f"; fail_on_error = {math.ceil(failed / total * 10_000) / 10_000:g} would score the others"
    return text


def shard_ranges(total: int, shards: int) -> list[range]:
    return [range(k * total // shards, (k + 1) * total // shards) for k in range(shards)]


@dataclass(eq=False)
class ShardRun:
    shard: int
    indices: range
    checkpoint: Checkpoint
    completed: int = 0
    failed: int = 0
    outstanding: int = 0  # samples of this shard not yet finished in this run
    last_write: float = 0.0
    status: PairStatus | None = None  # DONE | FAIL once finished

    @property
    def total(self) -> int:
        return len(self.indices)


@dataclass(eq=False)
class DatasetRun:
    cfg: DatasetConfig
    total: int
    version: str
    shards: list[ShardRun]
    done: set[int]  # indices finished successfully in earlier runs
    todo: Iterator[tuple[ShardRun, int, dict[str, Any] | str]] | None = None
    remaining: int = 0  # samples not finished in this run (queued + in flight)
    started: bool = False
    loaded: anyio.Event = field(default_factory=anyio.Event)
    ended: bool = False  # DatasetInferred is out: its predictions (if any) are written


def _todo(shards: list[ShardRun], done: set[int], records: Iterator[dict[str, Any] | None], path: str) -> Iterator[tuple[ShardRun, int, dict[str, Any] | str]]:
    """The samples left to run, in index order, each with its record read from the data file as
    workers take them (or why it could not be read): a dataset's records are never all in memory.

    The file was checked whole when the plan was loaded; should it change under a running
    dataset, the samples it no longer holds fail with the reason and the rest go on.
    """
    problem = ""
    for s in shards:
        for i in s.indices:
            record: dict[str, Any] | str | None = problem
            if not problem:
                try:
                    record = next(records)  # None for a sample in `done` (not read)
                except StopIteration:
                    problem = record = f"{path} now has only {i} records, expected {shards[-1].indices.stop}"
                except DatasetError as e:
                    problem = record = str(e)
            if i not in done:
                assert record is not None
                yield s, i, record


class ModelInference:
    def __init__(
        self,
        plan: Plan,
        model: ModelConfig,
        backend: Backend,
        workdir: WorkDir,
        board: StatusWriter,
        emit: ev.Sink,
        on_inferred: Callable[[str, str], None] | None = None,
    ):
        self.plan = plan
        self.model = model
        self.backend = backend
        self.workdir = workdir
        self.board = board
        self.emit = emit
        self.on_inferred = on_inferred or (lambda model, dataset: None)
        self.runs: list[DatasetRun] = []  # in the order they run; a retry appends the pair again
        self._cursor = 0  # index into runs of the dataset whose samples are being handed out
        self._next_to_start = 0
        self._tg: TaskGroup | None = None  # while run() runs: where datasets are loaded
        self._workers: TaskGroup | None = None  # while run() runs: the worker pool
        self._live_workers = 0
        self._early_start_below = 2 * model.max_workers
        self.in_flight = 0  # samples waiting on the server now
        self.requests = 0  # samples answered or failed for good in this run
        self._secrets = model_secrets(model)  # masked in failure messages: servers echo requests
        self._server_seen = False  # a reply (or an error only one sample has) came back in this run
        self._no_server = 0  # samples that found no server, while none has been seen
        self._stopped = ""  # why the model stopped before its samples were done

    # ------------------------------------------------------------------ planning (sync, in a thread)
    def plan_pairs(self, totals: dict[str, int], datasets: list[DatasetConfig], emit: ev.Sink) -> list[DatasetRun]:
        """Decide per dataset what is left from earlier runs; write `pending` statuses.

        Reads every checkpoint line and hashes the data file, so it runs in a worker thread; its
        events (DatasetPlanned, notices) go to `emit`, which the caller replays on the loop.
        The runs returned are handed to `add_runs`.
        """
        m = self.model.abbr
        wd = self.workdir
        runs = []
        for ds in datasets:
            total = totals[ds.abbr]
            version = self._drop_stale_work(ds, emit)
            if self._kept_whole(ds, total, emit):
                continue
            if wd.predictions_complete(m, ds.abbr) and not wd.checkpoint_files(m, ds.abbr):
                # Checkpoints deleted after the merge (as OpenCompass users do): the final file
                # holds the same samples, so it becomes the checkpoint to resume from.
                predictions_to_checkpoint(wd.predictions_file(m, ds.abbr), wd.checkpoint_file(m, ds.abbr, 0, 1))
            # Predictions for another limit, an unfinished shard or a file cut short: rebuild them.
            wd.predictions_file(m, ds.abbr).unlink(missing_ok=True)
            wd.result_file(m, ds.abbr).unlink(missing_ok=True)
            done: set[int] = set()
            for path in wd.checkpoint_files(m, ds.abbr):
                for index, ok, _ in scan_checkpoint(path):
                    if ok and 0 <= index < total:
                        done.add(index)
            n = ds.shards
            shards = []
            for k, r in enumerate(shard_ranges(total, n)):
                cp = Checkpoint(wd.checkpoint_file(m, ds.abbr, k, n), version)
                completed = sum(1 for i in r if i in done)
                shards.append(ShardRun(k, r, cp, completed=completed))
                self.board.write(m, ds.abbr, k, n, "pending", total=len(r), completed=completed, failed=0, version=version, reset=True)
            runs.append(DatasetRun(ds, total, version, shards, done, remaining=total - len(done)))
            emit(ev.DatasetPlanned(m, ds.abbr, total, n, len(done), 0, PairStatus.PENDING))
        return runs

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
                self._tg.start_soon(self._load, run)
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

    def _drop_stale_work(self, ds: DatasetConfig, emit: ev.Sink) -> str:
        """Forget what earlier runs did under other settings; the pair's version for this run."""
        m, wd = self.model.abbr, self.workdir
        data = file_fingerprint(self.plan, ds)
        version = pair_version(self.model, ds, data or "")
        current = {wd.status_file(m, ds.abbr, k, ds.shards) for k in range(ds.shards)}
        statuses = [read_json(p) for p in wd.status_files(m, ds.abbr)]
        seen = {s.get("version") for s in statuses if isinstance(s, dict)}
        seen |= {v for v in map(checkpoint_version, wd.checkpoint_files(m, ds.abbr)) if v}
        # An unreadable file (a mount gone away) proves nothing changed: keep the work; the
        # dataset fails when it is loaded, and the next run carries on.
        if data is not None and seen - {version, ""}:
            folder = wd.set_aside_pair(m, ds.abbr)
            # A status without a version was not written by evaltui (OpenCompass writes that layout).
            why = ("was written by another tool (no evaltui version in its status files)" if None in seen
                   else "the data file, the dataset's prompts or the model's settings changed since the last run")
            emit(ev.Notice(f"{m}/{ds.abbr}: {why}; starting it over (the earlier work is in {folder})", "warning"))
        for stale in set(wd.status_files(m, ds.abbr)) - current:
            stale.unlink()  # another shard layout: its samples are read back from its checkpoints
        result = wd.read_result(m, ds.abbr)
        if result is not None and result.get("scored_with") != evaluator_version(ds):
            wd.set_aside(wd.result_file(m, ds.abbr))  # scored another way (or failed): score again
        return version

    def _kept_whole(self, ds: DatasetConfig, total: int, emit: ev.Sink) -> bool:
        """Whether an earlier run finished this pair as this plan wants it (then it is announced)."""
        m, wd, n = self.model.abbr, self.workdir, ds.shards
        statuses = [s for s in (wd.read_status(m, ds.abbr, k, n) for k in range(n)) if s is not None]
        if not wd.predictions_complete(m, ds.abbr) or len(statuses) != n or not all(s.get("status") == "done" for s in statuses):
            return False
        if sum(s.get("total", -1) for s in statuses) != total:  # another limit
            return False
        if any(s.get("failed", 0) for s in statuses):
            # Samples that fail_on_error let pass are still tried again on every re-run (SPEC §5):
            # the pair resumes from its checkpoints, where only they are left to do.
            return False
        completed = sum(s.get("completed", 0) for s in statuses)
        result = wd.read_result(m, ds.abbr)
        if result is None or "error" in result:
            emit(ev.DatasetPlanned(m, ds.abbr, total, n, completed, 0, PairStatus.DONE))
            return True
        from evaltui.scoring import main_metric  # only when an earlier score is kept

        metric = main_metric(ds.evaluator.type)
        value = result.get(metric)
        score = float(value) if isinstance(value, (int, float)) else None
        emit(ev.DatasetPlanned(m, ds.abbr, total, n, completed, 0, PairStatus.SCORED, metric, score))
        return True

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
                self._close_interrupted()
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
        self.emit(ev.ModelLoad(self.model.abbr, self.in_flight, self.model.max_workers, self.backend.retries, self.requests))

    async def _poll(self) -> None:
        """The scheduling check every poll_interval, a safety net beside the per-sample checks."""
        while True:
            await anyio.sleep(self.plan.run.poll_interval)
            self._maybe_start_more()

    def _maybe_start_more(self) -> None:
        while self._next_to_start < len(self.runs):
            active_left = sum(r.remaining for r in self.runs[: self._next_to_start] if r.started)
            if self._next_to_start > 0 and active_left >= self._early_start_below:
                return
            run = self.runs[self._next_to_start]
            self._next_to_start += 1
            run.started = True
            assert self._tg is not None
            self._tg.start_soon(self._load, run)

    async def _load(self, run: DatasetRun) -> None:
        m, d = self.model.abbr, run.cfg.abbr
        try:
            # The file is opened (and a .json array parsed) in a thread; lines are read as needed.
            records = await anyio.to_thread.run_sync(open_records, self.plan, run.cfg, run.done)
        except (DatasetError, OSError) as e:
            self._end_failed(run, run.shards, str(e))  # nothing of it will run: the next dataset may start
            self._maybe_start_more()
            return
        for s in run.shards:
            s.outstanding = s.total - s.completed  # `completed` counted the kept samples when planned
        run.remaining = sum(s.outstanding for s in run.shards)
        run.todo = _todo(run.shards, run.done, records, run.cfg.path)
        self.emit(ev.DatasetStarted(m, d, run.total, run.remaining))
        loop = asyncio.get_running_loop()  # its call_soon: a turn's checkpoint lines go out in one write
        for s in run.shards:
            if s.outstanding:
                s.checkpoint.open(defer=loop.call_soon)
                s.last_write = time.monotonic()
                self.board.write(m, d, s.shard, len(run.shards), "running", total=s.total, completed=s.completed, failed=0, version=run.version)
                self.emit(ev.ShardStatusChanged(m, d, s.shard, len(run.shards), PairStatus.RUNNING, s.total, s.completed, 0))
            else:
                await self._finish_shard(run, s)
        run.loaded.set()
        self._maybe_start_more()

    async def _worker(self) -> None:
        try:
            await self._take_samples()
        finally:
            self._live_workers -= 1

    async def _take_samples(self) -> None:
        while self._cursor < len(self.runs):
            run = self.runs[self._cursor]
            if not run.started:
                self._maybe_start_more()
            if run.todo is None:
                await run.loaded.wait()
                continue
            job = next(run.todo, None)
            if job is None:
                if self.runs[self._cursor] is run:
                    self._cursor += 1
                continue
            await self._sample(run, *job)

    async def _sample(self, run: DatasetRun, shard: ShardRun, index: int, record: dict[str, Any] | str) -> None:
        cfg = run.cfg
        try:
            if isinstance(record, str):
                raise DatasetError(record)
            sample = render_sample(cfg, index, record)
        except Exception as e:  # the file changed since it was checked: this sample fails, not the run
            kind, message = "template", f"record {index}: cannot fill the templates: {type(e).__name__}: {e}"
            if isinstance(e, DatasetError):
                kind, message = "dataset", f"record {index}: {e}"
            entry: dict[str, Any] = {"index": index, "origin_prompt": "", "prediction": "", "gold": "", "error": {"type": kind, "status": None, "message": message, "attempts": 0}}
        else:
            self.in_flight += 1
            try:
                entry = await self._infer(cfg, sample)
            finally:
                self.in_flight -= 1
        self.requests += 1
        shard.checkpoint.append(entry)
        await shard.checkpoint.written()  # on disk before this worker sends its next request
        m, d = self.model.abbr, cfg.abbr
        if "error" in entry:
            shard.failed += 1
            self.emit(ev.SampleFailed(m, d, shard.shard, index, SampleError.from_dict(entry["error"])))
            self._check_server(entry["error"])
        else:
            shard.completed += 1
            self._server_seen = True
            self.emit(ev.SampleFinished(m, d, shard.shard, index))
        shard.outstanding -= 1
        run.remaining -= 1
        if shard.outstanding == 0:
            await self._finish_shard(run, shard)
        else:
            now = time.monotonic()
            if now - shard.last_write >= PROGRESS_WRITE_INTERVAL:
                shard.last_write = now
                self.board.write(m, d, shard.shard, len(run.shards), "running", total=shard.total, completed=shard.completed, failed=shard.failed, version=run.version)
        if run.remaining < self._early_start_below:
            self._maybe_start_more()

    def _check_server(self, error: dict[str, Any]) -> None:
        """Stop the model when its first samples all found no server (see NO_SERVER_AFTER)."""
        if self._server_seen or self._stopped:
            return
        if error.get("type") != "connect" and error.get("status") not in _NO_SERVER_STATUSES:
            self._server_seen = True  # an error of this sample's own (a prompt too long): the server is there
            return
        self._no_server += 1
        if self._no_server >= NO_SERVER_AFTER:
            code = f" {error['status']}" if error.get("status") is not None else ""
            why = f"{error.get('type')}{code}: {error.get('message')}"
            self._stopped = f"stopped: the model's server did not answer ({why})"
            hint = ""
            if error.get("status") == 404:
                hint = " (lightllm: the full …/generate URL; openai-* and lightllm-chat: the base URL, e.g. http://host:8000/v1)"
            self.emit(ev.Notice(
                f"{self.model.abbr}: the first {self._no_server} samples all failed and none was answered; stopping this model — "
                f"check its url ({self.backend.url}){hint} and that its server is up, then run again", "error"))
            if self._workers is not None:
                self._workers.cancel_scope.cancel()

    def _fail_unfinished(self, error: str) -> None:
        """Say `fail` (with why) for every shard the stopped model did not finish; a re-run resumes them."""
        m = self.model.abbr
        for run in self.runs:
            unfinished = [s for s in run.shards if s.status is None]
            if unfinished:
                self._end_failed(run, unfinished, error)
            else:  # ended already; one never started must not be waited for
                run.started, run.todo, run.remaining = True, iter(()), 0
                run.loaded.set()
        self._next_to_start = self._cursor = len(self.runs)  # all of it is over: nothing more to run

    def _end_failed(self, run: DatasetRun, shards: list[ShardRun], error: str) -> None:
        """End the dataset as failed: `fail` (with why) for these shards, DatasetInferred, the
        watcher woken; none of its samples is handed out any more."""
        m, d, n = self.model.abbr, run.cfg.abbr, len(run.shards)
        run.started, run.todo, run.remaining = True, iter(()), 0
        run.loaded.set()
        for s in shards:
            s.checkpoint.close()
            s.status, s.outstanding = PairStatus.FAIL, -1
            self.board.write(m, d, s.shard, n, "fail", total=s.total, completed=s.completed, failed=s.failed, error=error, version=run.version)
            self.emit(ev.ShardStatusChanged(m, d, s.shard, n, PairStatus.FAIL, s.total, s.completed, s.failed, error))
        self._end_dataset(run, PairStatus.FAIL, "", error)

    def _end_dataset(self, run: DatasetRun, status: PairStatus, path: str, error: str) -> None:
        """DatasetInferred (its predictions, if any, are written) and the watcher woken."""
        m, d = self.model.abbr, run.cfg.abbr
        run.todo = iter(())  # lets go of the data file at once
        run.ended = True
        completed = sum(s.completed for s in run.shards)
        failed = sum(s.failed for s in run.shards)
        self.emit(ev.DatasetInferred(m, d, status, completed, failed, path, error))
        self.on_inferred(m, d)

    async def _infer(self, cfg: DatasetConfig, sample: Sample) -> dict[str, Any]:
        """The checkpoint entry of one sample: its answer (gen), chosen continuation (ppl) or error."""
        entry: dict[str, Any] = {"index": sample.index, "origin_prompt": sample.prompt}
        try:
            if cfg.mode == "ppl":
                ppls = [await self.backend.ppl(sample.prompt + c) for c in sample.choices]
                best = min(range(len(ppls)), key=ppls.__getitem__)
                entry.update(prediction=sample.choices[best], gold=sample.target, ppl=ppls)
            else:
                entry.update(prediction=await self.backend.generate(sample.prompt, sample.system), gold=sample.target)
        except BackendError as e:
            error = e.as_dict()
            entry.update(prediction="", gold=sample.target, error={**error, "message": redact(error["message"], self._secrets)})
        except Exception as e:  # a bug must cost one sample, not the whole run
            message = redact(f"{type(e).__name__}: {e}", self._secrets)
            entry.update(prediction="", gold=sample.target, error={"type": "internal", "status": None, "message": message, "attempts": 1})
        return entry

    async def _finish_shard(self, run: DatasetRun, shard: ShardRun) -> None:
        """Close a shard whose samples are all finished: its final status, and the final
        predictions when it is the pair's last. Shielded: a Ctrl-C as the checkpoints are being
        merged (a thread that cannot be stopped anyway) takes effect once the shard says how it ended."""
        with anyio.CancelScope(shield=True):
            await self._finish_shard_now(run, shard)

    async def _finish_shard_now(self, run: DatasetRun, shard: ShardRun) -> None:
        m, d = self.model.abbr, run.cfg.abbr
        n = len(run.shards)
        shard.checkpoint.close()
        # fail_on_error is a budget for the whole dataset, so the outcome does not depend on
        # `shards`: a shard fails when the dataset's failures so far exceed it, and the last
        # shard to end therefore fails exactly when the dataset's total does.
        failed = sum(s.failed for s in run.shards)
        ok = failed <= failure_budget(run.cfg, run.total)
        status = PairStatus.DONE if ok else PairStatus.FAIL
        error = "" if ok else _over_budget(run.cfg, failed, run.total)
        shard.outstanding = -1  # finished
        all_final = all(s.outstanding == -1 for s in run.shards)
        final_status = PairStatus.FAIL
        if all_final:
            others_done = all(s.status == PairStatus.DONE for s in run.shards if s is not shard)
            final_status = PairStatus.DONE if status == PairStatus.DONE and others_done else PairStatus.FAIL
            if final_status == PairStatus.DONE:
                # Predictions before the last `done`: a watcher that sees all shards done finds them.
                await self._write_predictions(run)
        self.board.write(m, d, shard.shard, n, status, total=shard.total, completed=shard.completed, failed=shard.failed, error=error, version=run.version)
        # Only once its status file says so: should the merge or the write fail (a full disk),
        # _close_interrupted still finds the shard unfinished and says `pending`, not `running`.
        shard.status = status
        self.emit(ev.ShardStatusChanged(m, d, shard.shard, n, status, shard.total, shard.completed, shard.failed, error))
        if all_final:
            path = str(self.workdir.predictions_file(m, d)) if final_status == PairStatus.DONE else ""
            self._end_dataset(run, final_status, path, error)

    async def _write_predictions(self, run: DatasetRun) -> None:
        """Merge the checkpoints into the final file, in a thread: it reads every line."""
        m, d = self.model.abbr, run.cfg.abbr
        paths = self.workdir.checkpoint_files(m, d)  # this layout's shards and any earlier layout's
        await anyio.to_thread.run_sync(merge_checkpoints, paths, run.total, self.workdir.predictions_file(m, d))

    def _close_interrupted(self) -> None:
        """On cancellation: close checkpoints and say in the status files that work is left.

        Every shard that has not ended (`done`/`fail`) is said `pending`, so no status file is
        left `running` by a run that stopped."""
        m = self.model.abbr
        for run in self.runs:
            if not run.started:
                continue
            for s in run.shards:
                if s.status is None:
                    s.checkpoint.close()
                    # (OSError: the disk that stopped the run; the next run re-plans the shard anyway)
                    with contextlib.suppress(OSError):
                        self.board.write(
                            m, run.cfg.abbr, s.shard, len(run.shards), "pending", total=s.total, completed=s.completed,
                            failed=s.failed, error="interrupted; run again to resume", version=run.version,
                        )
