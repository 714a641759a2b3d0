"""The watch-scorer (SPEC §7): scores each model×dataset as soon as all its shards are done.

It reads the same status and heartbeat files a separate OpenCompass watcher would, so what it
believes is what is on disk, never an in-memory shortcut: a pair is scored only when every shard
status says `done` and the final predictions file exists. The in-process runner may `wake` it
early and tells it when inference has ended, so it neither waits out `watch_interval` for a
finished dataset nor `heartbeat_timeout` at the end of a run.

Scoring runs in worker threads (code execution in subprocesses), at most `eval_workers` at a
time; a small pair of a light evaluator is scored in the run's worker process when it has one
(engine/score/process.py: a plan of many of them), else on the event loop, in one of those
slots (`_score_on_loop`: a thread hop cost more than its scoring). An evaluator that raises
becomes an error result for its pair.
A thread cannot be stopped, so a scoring that a retry or a quit abandons is fenced off instead
(engine/score/gate.py): it may only put its result in place while the pair's generation is the
one it started under. It keeps its `eval_workers` slot until its thread really ends, so
abandoned scorings never add to the ones running.

Pairs can be added while it runs (a retry joining the live run) and forgotten (a retry of a pair
it was about to score or was scoring).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import threading
import time
from collections.abc import Callable, Container, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
from anyio.abc import TaskGroup

from evaltui.engine.disk.heartbeat import stale
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.run.runs import SMALL_DATA_BYTES
from evaltui.engine.score.gate import ScoreGate, StaleResult
from evaltui.engine.score.pairscore import Replace, Scored, failure_message, score_pair
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair
from evaltui.fsutil import atomic_writer, dumps_readable
from evaltui.plan import Plan

if TYPE_CHECKING:
    from evaltui.engine.judge.judging import Judges
    from evaltui.engine.score.process import WorkerProcess
    from evaltui.scoring.code.code_exec import CodeRunner


class Ready(NamedTuple):
    """What the scan read of a pair it found ready: its shards' statuses (all `done`) and the
    size of its predictions file (what decides whether it is scored on the loop)."""

    statuses: tuple[dict[str, Any], ...]
    size: int


#: Evaluators that judge text in this process alone, in microseconds a sample: no code run, no
#: judge model, no user function, no model of their own to load (ifeval's NLTK, OpenCompass's).
#: gsm8k asks math-verify's worker of an answer that is an expression: on the loop that raises
#: NeedsThread and the pair is scored in a thread after all.
LIGHT = frozenset({"exact", "includes", "regex", "gsm8k", "choice", "exact_match", "loglikelihood", "tool_call_match"})
#: Predictions files up to this size (~30 answers of a page each; a short answer takes ~100 bytes)
#: are scored on the event loop: ~1-3 ms of Python, less than a thread hop costs the loop once the
#: worker holds the GIL. Scoring reads, parses and judges every byte, so bytes, not samples, bound
#: how long the loop (and every request in flight, whose latency it measures) waits.
INLINE_BYTES = 32 * 1024
#: Scorings on the loop one after another (less than INLINE_GAP s between one's end and the next
#: one's start: the loop has not gone round between them) for more than INLINE_BUDGET s: the rest
#: of the burst goes to threads. A burst of pairs ready at once (a re-run after an evaluator's
#: settings changed rescores every dataset) must not hold up the requests in flight, whose latency
#: is measured on this loop and whose timeouts are its timers, for seconds; pairs as inference
#: ends them come in bursts of ~10 (~5 ms), and stay on the loop.
INLINE_BUDGET = 0.02
INLINE_GAP = 0.002
#: `scorer_process = "auto"`: a worker process of its own for a plan of at least this many
#: pairs of LIGHT evaluators (models × datasets): below it, its start (~0.3 s of the other core)
#: and a frame each way per pair buy little.
PROCESS_PAIRS = 200


class Scorer:
    def __init__(
        self,
        plan: Plan,
        workdir: WorkDir,
        emit: ev.Sink,
        *,
        clock: Callable[[], float] = time.time,
        code_workers: int = 2,
        gate: ScoreGate | None = None,
        run_code: CodeRunner | None = None,
        inferring: Callable[[], bool] | None = None,
        judges: Judges | None = None,
    ):
        """`run_code`: what runs code_exec's programs (by default a thread pool of `code_workers`).
        `inferring`: whether the inference it scores is under way, when the scorer can know (it
        runs in the same process): then a stale heartbeat says nothing — the process was paused
        (SIGSTOP, a laptop asleep), not gone — and only a scorer that cannot know goes by it."""
        self.plan = plan
        self.workdir = workdir
        self.emit = emit
        self.pending: dict[Pair, None] = {}  # added (add) as their inference is queued; in order
        self._due: dict[Pair, None] = {}  # pending pairs to look at: added, or said inferred, since the last scan
        self.clock = clock
        self.code_workers = code_workers
        self.run_code = run_code
        self.gate = gate or ScoreGate()
        self.inferring = inferring
        self.judges = judges  # a judged pair's answers not judged while it was inferred are sent to its judge before it is scored
        self.offload: WorkerProcess | None = None  # the run's worker process (`[run] scorer_process`), set by the session
        self.running = False  # run() is watching (a pair added now is seen)
        self._scoring: dict[Pair, anyio.CancelScope] = {}
        self._wake = anyio.Event()
        self._inference_done = False
        self._warmed = False
        # Its own thread limiter, not anyio's default one that loading data and merging
        # checkpoints use. The loop gives its token back when it abandons a scoring
        # (abandon_on_cancel), so the slots are also taken inside the thread, until it really ends.
        self._limiter = anyio.CapacityLimiter(plan.run.eval_workers)
        self._slots = threading.BoundedSemaphore(plan.run.eval_workers)
        self._stretch = (-math.inf, -math.inf)  # (start, end) of the latest scorings on the loop one after another: INLINE_BUDGET

    def wake(self) -> None:
        self._wake.set()

    def inferred(self, pair: Pair) -> None:
        """A pair's inference ended here: look at it now (a scorer that knows its inference looks at no other)."""
        self._due[pair] = None
        self._wake.set()

    def inference_finished(self) -> None:
        self._inference_done = True
        self._wake.set()

    def inference_restarted(self) -> None:
        """More inference began (a retry): pairs not done yet are waited for again."""
        self._inference_done = False

    def add(self, pairs: Iterable[Pair], *, inferred_later: Container[Pair] = ()) -> None:
        """Watch these pairs too (their inference was queued); run() must be running or started.

        `inferred_later`: those whose inference this process has queued, looked at once said
        inferred (`inferred`), not now: they have no predictions yet, and that futile look was
        half of the scan's cost with thousands of small datasets. (A scorer that cannot know its
        inference, and the final scan, look at every pending pair whatever this says.)"""
        for pair in pairs:
            self.pending[pair] = None
            if pair not in inferred_later:
                self._due[pair] = None
        self._wake.set()

    def forget(self, pair: Pair) -> None:
        """Stop watching `pair` and abandon its scoring, whose result could only be stale now."""
        self.gate.invalidate(pair)
        self.pending.pop(pair, None)
        scope = self._scoring.pop(pair, None)
        if scope is not None:
            scope.cancel()
        self._wake.set()

    def _ready(self, pair: Pair) -> Ready | None:
        """What it read of `pair` when every shard says `done` and its predictions are there, else None.

        The predictions file is looked for first (its size read with it: one stat): a pair
        queued for inference has none yet, and a stat is cheaper than the status files (a pair's
        inference writes its predictions before its last `done`; one seen done without them is
        looked at again when said inferred)."""
        model, dataset = pair
        n = self.plan.dataset(dataset).shards
        statuses = []
        try:
            size = os.stat(self.workdir.predictions_file(model, dataset)).st_size  # (none: FileNotFoundError)
            for k in range(n):
                status = self.workdir.read_status(model, dataset, k, n)
                if not status or status.get("status") != "done":
                    return None
                statuses.append(status)
            baseline = self.plan.dataset(dataset).evaluator.baseline  # pairwise: judged against its answers
            if baseline is not None and baseline != model and self._ready((baseline, dataset)) is None:
                return None
            return Ready(tuple(statuses), size)
        except OSError:  # not there (FileNotFoundError), or cannot look now (e.g. out of file handles): not ready yet
            return None

    async def run(self) -> None:
        """Score pending pairs as they become ready; return when none is pending or scoring."""
        self.running = True
        interval = self.plan.run.watch_interval
        timeout = self.plan.run.heartbeat_timeout
        started = self.clock()
        try:
            async with anyio.create_task_group() as tg:
                if not self._warmed:
                    self._warmed = True
                    tg.start_soon(self._warm_up)
                while self.pending or self._scoring:
                    if self.pending:
                        self._scan(tg, started, timeout)
                    if not self.pending and not self._scoring:
                        break
                    with anyio.move_on_after(interval):
                        await self._wake.wait()
                    self._wake = anyio.Event()
                self.running = False  # from here on, a pair added needs another run()
                tg.cancel_scope.cancel()  # the warm-up, if it is still importing
        finally:
            self.running = False

    def _scan(self, tg: TaskGroup, started: float, timeout: float) -> None:
        final_scan = self._inference_done  # read before scanning: no finish slips between
        due, self._due = self.pending if final_scan or self.inferring is None else [p for p in self._due if p in self.pending], {}
        batch: list[tuple[Pair, Ready, anyio.CancelScope]] = []  # small pairs of light evaluators: to the worker process in one request
        for pair, ready in [(p, r) for p in due if (r := self._ready(p)) is not None]:
            del self.pending[pair]
            self._scoring[pair] = anyio.CancelScope()
            if self.offload is not None and not self.offload.lost and self._light(pair, ready):
                batch.append((pair, ready, self._scoring[pair]))
            else:
                tg.start_soon(self._score, pair, self._scoring[pair], ready)
        if batch:
            tg.start_soon(self._score_batch, batch)
        if not self.pending:
            return
        if final_scan:
            self.emit(ev.ScoringSkipped(tuple(self.pending), "inference finished; these did not end done (see infer_status/)"))
            self.pending = {}
            return
        if self.inferring is not None and self.inferring():
            return  # its own inference, alive: it says when it has finished
        now = self.clock()
        try:
            age = self.workdir.heartbeat_age(now)
        except OSError:
            age = None
        if age is None:  # no beat yet: count from our own start, as a beat that never came
            age = now - started
        if stale(age, timeout):
            self.emit(ev.ScoringSkipped(tuple(self.pending), f"heartbeat stale for {age:.0f} s (> heartbeat_timeout {timeout:g} s): inference is gone"))
            self.pending = {}

    async def _warm_up(self) -> None:
        """Import the evaluators in a thread while inference waits on the network.

        Not at once (it would compete with start-up for the GIL and delay the first request) and
        not at the first scoring (after the last dataset it would add to the run's wall time).
        """
        await anyio.sleep(0.5)
        await anyio.to_thread.run_sync(importlib.import_module, "evaltui.scoring")

    def _score_in_slot(self, pair: Pair, token: tuple[int, int], replace: Replace, ready: Ready) -> Scored:
        """In a worker thread: score `pair` once one of the `eval_workers` slots is free."""
        with self._slots:
            return self._score_now(pair, token, replace, ready)

    def _score_now(self, pair: Pair, token: tuple[int, int], replace: Replace, ready: Ready) -> Scored:
        self.gate.check(pair, token)
        return score_pair(self.plan, self.workdir, pair[0], pair[1], self.code_workers, replace, self.run_code, ready.statuses)

    def _light(self, pair: Pair, ready: Ready) -> bool:
        ds = self.plan.dataset(pair[1])
        if ds.evaluator.type not in LIGHT or ds.benchmark or ready.size > INLINE_BYTES:
            return False
        try:  # its fingerprint may be read again (a data file touched since it was planned): a small one only
            return os.stat(self.plan.dataset_path(ds)).st_size <= SMALL_DATA_BYTES
        except OSError:
            return False

    async def _score_small(self, pair: Pair, token: tuple[int, int], replace: Replace, ready: Ready) -> Scored | None:
        """A small pair of a LIGHT evaluator: in the worker process when the run has one
        (`offload`), else on the loop; None when neither could (a thread scores it)."""
        if self.offload is not None:
            self.gate.check(pair, token)
            scored = await self.offload.score(pair, ready.statuses, replace)
            if scored is not None:
                return scored
        return await self._score_on_loop(pair, token, replace, ready)

    async def _score_on_loop(self, pair: Pair, token: tuple[int, int], replace: Replace, ready: Ready) -> Scored | None:
        """Score a small pair of a LIGHT evaluator on the loop, once one of the `eval_workers`
        slots is free, as a thread would; None (nothing written) when the loop has had its
        INLINE_BUDGET of scoring, an abandoned thread still holds the slot, or the pair needs
        math-verify's worker: then a thread scores it.

        The engine has a loop of its own (ui/engine_thread.py), so no key press waits on this.
        Once a thread holds the GIL the loop's own syscalls wait for it: a hop per dataset of
        three samples cost more than scoring it. Being synchronous, it cannot be abandoned half
        way: the gate is checked before it begins and again (with the rename) as it ends."""
        from evaltui.scoring.readers.mathcheck import ON_LOOP, NeedsThread

        try:
            self._limiter.acquire_nowait()
        except anyio.WouldBlock:
            await self._limiter.acquire()  # (cancelled, by forget or a quit: it holds nothing)
        began = time.perf_counter()
        start, end = self._stretch
        if began - end > INLINE_GAP:  # the loop went round since: a new stretch
            start = began
        on_loop = ON_LOOP.set(True)
        try:
            if began - start > INLINE_BUDGET or not self._slots.acquire(blocking=False):
                return None
            try:
                return self._score_now(pair, token, replace, ready)
            finally:
                self._slots.release()
        except NeedsThread:
            return None
        finally:
            ON_LOOP.reset(on_loop)
            self._limiter.release()
            self._stretch = (start, time.perf_counter())

    async def _score(self, pair: Pair, scope: anyio.CancelScope, ready: Ready) -> None:
        token = self.gate.token(pair)
        replace = self.gate.replacer(pair, token)
        try:
            with scope:  # cancelled by forget(): a retry of this pair began
                if scope.cancel_called:  # forgotten before it started
                    return
                self.emit(ev.DatasetScoring(*pair))
                try:
                    if self.judges is not None:
                        await self.judges.judge_pair(self.workdir, *pair)
                    outcome: Scored | Exception = await self._scored_here(pair, token, replace, ready)
                except Exception as e:  # one evaluator's failure is that pair's error, not the run's
                    outcome = e
                self._settle(pair, token, replace, outcome)
        finally:
            self._release(pair, scope)

    async def _score_batch(self, batch: list[tuple[Pair, Ready, anyio.CancelScope]]) -> None:
        """Small pairs of light evaluators found ready in one scan (the datasets of a batch that
        ended together: ending.py), scored in the worker process in one request: a frame each way
        for all of them, not a task, a frame and a wake-up each. Should the process be gone, each
        is scored here as it would be alone. A pair forgotten (a retry began) is passed by."""
        assert self.offload is not None
        try:
            live = [(pair, ready, self.gate.token(pair), scope) for pair, ready, scope in batch if not scope.cancel_called]
            replaces = [self.gate.replacer(pair, token) for pair, _, token, _ in live]
            for pair, *_ in live:
                self.emit(ev.DatasetScoring(*pair))
            outcomes = await self.offload.score_many([(pair, ready.statuses, replace) for (pair, ready, *_), replace in zip(live, replaces, strict=True)])
            for i, ((pair, ready, token, scope), replace) in enumerate(zip(live, replaces, strict=True)):
                with scope:  # (forget(): a retry of the pair began)
                    try:
                        outcome = await self._scored_here(pair, token, replace, ready) if outcomes is None else outcomes[i]
                    except Exception as e:
                        outcome = e
                    self._settle(pair, token, replace, outcome)
        finally:
            for pair, _, scope in batch:
                self._release(pair, scope)

    async def _scored_here(self, pair: Pair, token: tuple[int, int], replace: Replace, ready: Ready) -> Scored:
        # abandon_on_cancel: Ctrl-C must not wait for a long code_exec batch (the gate keeps the abandoned thread from writing, _slots from adding up)
        scored = await self._score_small(pair, token, replace, ready) if self._light(pair, ready) else None
        if scored is None:
            scored = await anyio.to_thread.run_sync(self._score_in_slot, pair, token, replace, ready, abandon_on_cancel=True, limiter=self._limiter)
        return scored

    def _settle(self, pair: Pair, token: tuple[int, int], replace: Replace, outcome: Scored | Exception) -> None:
        """Say how the pair's scoring ended: its metrics, or its error (an error result written in
        place of its result); nothing when a retry of it began meanwhile (StaleResult)."""
        from evaltui.scoring import Reduction

        if isinstance(outcome, StaleResult):
            return
        model, dataset = pair
        ds = self.plan.dataset(dataset)
        metric = Reduction.of(ds.evaluator, self.plan.epochs(ds)).main
        result_file = str(self.workdir.result_file(model, dataset))
        if isinstance(outcome, Exception):
            message = failure_message(outcome)
            # (OSError: the event below still says it; the next run scores again)
            with contextlib.suppress(OSError, StaleResult), atomic_writer(result_file, replace=replace) as w:
                w.write(dumps_readable({"error": message}).encode("utf-8"))
            if self.gate.current(pair, token):
                self.emit(ev.DatasetScored(model, dataset, metric, None, message, result_file))
        elif self.gate.current(pair, token):
            extra: ev.Metrics = tuple((name, value) for name, value in outcome.metrics.items() if name != metric)
            self.emit(ev.DatasetScored(model, dataset, metric, outcome.metrics[metric], "", result_file, extra, outcome.parts, outcome.intervals))

    def _release(self, pair: Pair, scope: anyio.CancelScope) -> None:  # its scoring over (unless forgotten and scored again)
        if self._scoring.get(pair) is scope:
            del self._scoring[pair]
        self._wake.set()


def wants_process(plan: Plan) -> bool:
    """Whether this plan's small pairs are scored in a process of their own (`[run] scorer_process`)."""
    choice = plan.run.scorer_process
    if choice != "auto":
        return choice == "always"
    light = sum(1 for ds in plan.datasets if ds.evaluator.type in LIGHT and not ds.benchmark)
    return light * sum(1 for m in plan.models if m.role == "tested") >= PROCESS_PAIRS
