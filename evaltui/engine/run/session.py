"""A session: one stretch of inference and scoring, which a retry can join while it runs.

The runner starts one per `run()` (and per `retry()` once a run has ended). It owns what lives
as long as the work does — one HTTP client per model (made when a model first has work), the
heartbeat thread, the watch-scorer, the `max_num_workers` limiter — and takes more work at any
time until its last task ends: a retried pair is planned again (in a worker thread: planning
reads every checkpoint line and hashes the data), its model's pool gets the pair's failed
samples back, and the scorer gets the pair back.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack

import anyio
from anyio.abc import TaskGroup

from evaltui.engine.disk.heartbeat import HeartbeatThread
from evaltui.engine.disk.workdir import StatusWriter, WorkDir
from evaltui.engine.judge.judging import Judges
from evaltui.engine.run.executor import Executor, LocalExecutor
from evaltui.engine.run.pool import WorkerPool
from evaltui.engine.run.resume import plan_chunk
from evaltui.engine.run.runs import DatasetRun
from evaltui.engine.run.scorer import Scorer, wants_process
from evaltui.engine.score.gate import ScoreGate
from evaltui.engine.score.process import WorkerProcess
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair
from evaltui.exitcode import ExitCode
from evaltui.plan import DatasetConfig, Plan
from evaltui.plan.price import CostMeter

FIRST_PLANNED = 16  # datasets planned before the first are handed out; each chunk after is twice as large…
MOST_PLANNED = 1024  # …up to this many


def planning_chunks(datasets: list[DatasetConfig]) -> list[list[DatasetConfig]]:
    """The datasets in the chunks they are planned in, each handed to the pool once planned:
    planning writes each pair's `pending` status and reads its earlier files (~1 ms a dataset on
    a loaded disk), and 10,000 datasets planned before the first started kept the server idle for
    tens of seconds. Growing chunks: the first requests go out at once, and few chunks (each lists
    the work dir's folders once) plan the rest while inference runs."""
    chunks, at, size = [], 0, FIRST_PLANNED
    while at < len(datasets):
        chunks.append(datasets[at : at + size])
        at, size = at + size, min(2 * size, MOST_PLANNED)
    return chunks


class Session:
    def __init__(
        self,
        plan: Plan,
        workdir: WorkDir,
        statuses: StatusWriter,
        emit: ev.Sink,
        *,
        code_workers: int,
        gate: ScoreGate,
        executor: Executor | None = None,
    ):
        """`executor`: where units are answered and code_exec runs (by default here: LocalExecutor)."""
        self.plan = plan
        self.workdir = workdir
        self.statuses = statuses
        self.emit = emit
        self.executor = executor or LocalExecutor()
        self.cost = CostMeter(plan)  # the session's spend, over every model; cost_limit
        self.urls: dict[str, list[str]] = {}
        self.totals: dict[str, int] = {}
        self.judges = Judges(plan, workdir, lambda: self.urls, emit)  # the judge models, their clients made at their first verdict
        self.scorer = Scorer(
            plan, workdir, emit, code_workers=code_workers, gate=gate, run_code=self.executor.run_code, judges=self.judges,
            inferring=lambda: bool(self._running or self._planning),  # it knows its own inference is alive
        )
        self.exit_code: int = ExitCode.FAILED
        self.ended = anyio.Event()  # set by the runner once RunFinished is out
        self._opened = anyio.Event()
        self._work: TaskGroup | None = None  # while it takes work
        self._stack: AsyncExitStack | None = None
        self._pools: dict[str, WorkerPool] = {}
        self._running: set[str] = set()  # models whose pool runs or waits for the limiter
        self._planning: set[Pair] = set()
        self._clients = anyio.Lock()
        self._limiter = anyio.CapacityLimiter(plan.run.max_num_workers)

    async def run(self, pairs: list[Pair], *, retry: bool) -> None:
        """Infer and score `pairs` (a retry: only their failed samples), and whatever joins."""
        try:
            async with AsyncExitStack() as stack:
                self._stack = self.judges.stack = stack
                self._check_open_files({m for m, _ in pairs})
                with HeartbeatThread(self.workdir, self.plan.run.heartbeat_interval):
                    async with anyio.create_task_group() as outer:
                        outer.start_soon(self._report_heartbeats)
                        if wants_process(self.plan):
                            self.scorer.offload = WorkerProcess(self.plan, self.workdir, self.scorer.code_workers, outer, self.emit)
                            stack.push_async_callback(self.scorer.offload.aclose)
                            outer.start_soon(self.scorer.offload.start)  # its ~0.5 s start-up while the first datasets run
                        async with anyio.create_task_group() as work:
                            self._work = self.judges.tasks = work  # a judged pair's answers are drained into its judge here
                            self._opened.set()
                            work.start_soon(self._add, pairs, retry)
                        self._work = self.judges.tasks = None  # no await since its last task ended: nothing slips in
                        outer.cancel_scope.cancel()
        finally:
            self.close_intake()

    def close_intake(self) -> None:
        """The session takes no more work (it ended, or never began: its start failed); a
        retry waiting in `join` goes on to run in a session of its own."""
        self._work = None
        self._opened.set()

    async def join(self, pairs: list[Pair]) -> bool:
        """Add a retry of `pairs` to this live session; False once it no longer takes work."""
        await self._opened.wait()
        if self._work is None:
            return False
        self._work.start_soon(self._add, pairs, True)
        return True

    # ------------------------------------------------------------------ adding work
    async def _add(self, pairs: list[Pair], retry: bool) -> None:
        if retry:
            pairs = self._retryable(pairs)
            if not pairs:
                return
            self.emit(ev.RetryStarted(tuple(pairs)))
            for pair in pairs:
                self.scorer.forget(pair)  # before its files go: a scoring in flight must not write
        self._planning.update(pairs)
        try:
            wanted = set(pairs)  # a set: 10,000 datasets looked up in their list took ~1.5 s
            for model in dict.fromkeys(m for m, _ in pairs):
                pool = await self._pool(model)
                datasets = [d for d in self.plan.datasets if (model, d.abbr) in wanted]
                for chunk in [datasets] if retry else planning_chunks(datasets):
                    events: list[ev.Event] = []
                    # In the worker process once it is up, or once chunks are the largest (~1,000
                    # datasets planned here by then: it is up, or nearly); here before (the first
                    # requests go out while it starts), for a retry, and when the run has none.
                    # (Its `pending` statuses need no word to this process's StatusWriter: only a
                    # run's first session plans there, and its writer, new with the run, wrote none.)
                    offload, planned = self.scorer.offload, None
                    if not retry and offload is not None and (offload.ready or len(chunk) >= MOST_PLANNED):
                        planned = await offload.plan_chunk(model, chunk, self.totals)
                    if planned is not None:
                        runs, pending, events = planned
                    else:
                        runs, pending = await anyio.to_thread.run_sync(self._plan, pool, chunk, retry, events.append)
                    for e in events:
                        self.emit(e)
                    self._planning.difference_update((model, d.abbr) for d in chunk)
                    self._hand_over(pool, runs, pending, retry)
        finally:
            self._planning.difference_update(pairs)
        self._maybe_finished()

    def _hand_over(self, pool: WorkerPool, runs: list[DatasetRun], pending: list[Pair], retry: bool) -> None:
        """Planned pairs to their model's pool (started if it is not running) and the scorer."""
        pool.add_runs(runs, first=retry)
        self.scorer.add(pending, inferred_later={(pool.model.abbr, r.cfg.abbr) for r in runs})  # looked at once inferred
        if runs:
            self._start(pool)
        assert self._work is not None  # _add is one of its tasks
        if self.scorer.pending and not self.scorer.running:
            self.scorer.running = True
            self._work.start_soon(self.scorer.run)

    def _maybe_finished(self) -> None:
        """Tell the scorer (and the judges' feeds) inference is over once no pool runs and no
        pair is being planned (a retry being planned brings more)."""
        if not self._running and not self._planning:
            self.scorer.inference_finished()
            self.judges.close_feeds()

    def _retryable(self, pairs: list[Pair]) -> list[Pair]:
        """The pairs not being planned or inferred right now (those are already on their way)."""
        busy = [p for p in pairs if p in self._planning or (p[0] in self._pools and self._pools[p[0]].busy(p[1]))]
        if busy:
            names = ", ".join(f"{m}/{d}" for m, d in busy)
            self.emit(ev.Notice(f"not retried, still running: {names}", "warning"))
        return [p for p in pairs if p not in busy]

    def _plan(self, pool: WorkerPool, datasets: list[DatasetConfig], retry: bool, emit: ev.Sink) -> tuple[list[DatasetRun], list[Pair]]:
        """In a worker thread: what is left of each pair, and which of them await scoring."""
        m, wd = pool.model.abbr, self.workdir
        if retry:
            for d in datasets:
                # Scored again. The final predictions stay: they may be the only copy of the answers
                # (checkpoints deleted after the merge); planning resumes the pair from them, and a
                # pair with failures (even those fail_on_error tolerated) is never kept whole.
                wd.result_file(m, d.abbr).unlink(missing_ok=True)
        return plan_chunk(self.plan, pool.model, wd, self.statuses, self.totals, datasets, emit)

    async def _pool(self, model: str) -> WorkerPool:
        """The model's pool, with what answers its units (an HTTP client here, or Ray actors), made
        the first time the model has work."""
        async with self._clients:
            pool = self._pools.get(model)
            if pool is None:
                assert self._stack is not None
                cfg = next(m for m in self.plan.models if m.abbr == model)
                urls = self.urls.get(model) or list(cfg.urls)
                answerer = await self.executor.answerer(cfg, urls, self._stack, self.emit)
                pool = WorkerPool(
                    self.plan, cfg, answerer, self.workdir, self.statuses, self.emit, on_inferred=lambda m, d: self.scorer.inferred((m, d)), cost=self.cost,
                    on_answered=self.judges.answered,
                )
                if self.scorer.offload is not None:  # a batch of small datasets' `done` files made there, as their scoring is
                    pool.ending.elsewhere = self.scorer.offload.write_files
                self._pools[model] = pool
            return pool

    def _start(self, pool: WorkerPool) -> None:
        m = pool.model.abbr
        if m in self._running:
            return  # its pool takes the new runs itself (or runs again when it ends)
        self._running.add(m)
        self.scorer.inference_restarted()
        assert self._work is not None
        self._work.start_soon(self._infer, pool)

    async def _infer(self, pool: WorkerPool) -> None:
        try:
            async with self._limiter:
                while pool.has_work():
                    await pool.run()
        finally:
            self._running.discard(pool.model.abbr)
            self._maybe_finished()

    # ------------------------------------------------------------------ around the work
    async def _report_heartbeats(self) -> None:
        last = None
        while True:
            try:
                age = self.workdir.heartbeat_age()
            except OSError:
                age = None
            if age is not None:
                at = time.time() - age
                if last is None or abs(at - last) > 1e-3:
                    last = at
                    self.emit(ev.Heartbeat(at))
            await anyio.sleep(min(1.0, self.plan.run.heartbeat_interval))

    def _check_open_files(self, models: set[str]) -> None:
        """One socket per request in flight (the largest models may run together), plus
        checkpoints, status writes and scoring."""
        widths = [m.max_workers for m in self.plan.models if m.abbr in models]
        widest = sorted(widths, reverse=True)[: self.plan.run.max_num_workers]
        needed = sum(widest) + sum(d.shards for d in self.plan.datasets) + 256
        limit = ensure_open_files(needed)
        if limit is not None and limit < needed:
            self.emit(ev.Notice(
                f"the open-files limit is {limit} but max_workers needs about {needed}: requests may fail with "
                "'Too many open files' (raise it with `ulimit -n`, or lower max_workers)", "warning"))


def ensure_open_files(needed: int) -> int | None:
    """Raise the soft open-files limit towards `needed`; the limit now in force (None: no limit)."""
    try:
        import resource
    except ImportError:  # not on Unix
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    if soft >= needed:
        return soft
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target
